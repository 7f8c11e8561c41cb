// H2fidClient.java - Java's HttpClient as a client for h2_fidelity.py: one
// GET with version HTTP_2 (on an http:// URL it asks for Upgrade: h2c),
// printing the status, the body's sha256 and size, and the version the
// response came in, as JSON.
// usage: java -cp DIR H2fidClient URL... (one client, so one connection:
// the first request upgrades it, the next ones are HTTP/2 streams on it)
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.MessageDigest;
import java.time.Duration;

public class H2fidClient {
    public static void main(String[] args) throws Exception {
        HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_2)
                .connectTimeout(Duration.ofSeconds(10)).build();
        for (String url : args) {
            HttpRequest req = HttpRequest.newBuilder(URI.create(url))
                    .timeout(Duration.ofSeconds(10)).GET().build();
            try {
                HttpResponse<byte[]> r = c.send(req, HttpResponse.BodyHandlers.ofByteArray());
                StringBuilder hex = new StringBuilder();
                for (byte b : MessageDigest.getInstance("SHA-256").digest(r.body()))
                    hex.append(String.format("%02x", b));
                String v = r.version() == HttpClient.Version.HTTP_2 ? "2" : "1.1";
                System.out.println("{\"status\": " + r.statusCode() + ", \"sha\": \"" + hex
                        + "\", \"n\": " + r.body().length + ", \"version\": \"" + v + "\"}");
            } catch (Exception e) {
                System.out.println("{\"error\": \"" + e.getClass().getName() + "\"}");
            }
        }
    }
}
