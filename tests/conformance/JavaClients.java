// JavaClients.java - Java 17 clients meeting a fault; prints
// "RESULT <exception> <ms>". Java connects its dual-stack sockets to
// IPv4-mapped IPv6 addresses, so the shim's IPv4 rules must still apply.
// usage: java JavaClients http|socket HOST PORT [PATH]
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class JavaClients {
    public static void main(String[] args) {
        long t0 = System.nanoTime();
        String name = "ok";
        String path = args.length > 3 ? args[3] : "/";
        try {
            if (args[0].equals("http")) {
                HttpClient c = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
                HttpRequest r = HttpRequest.newBuilder(URI.create("http://" + args[1] + ":" + args[2] + path))
                        .timeout(Duration.ofSeconds(2)).build();
                c.send(r, HttpResponse.BodyHandlers.ofString());
            } else {
                try (Socket s = new Socket()) {
                    s.connect(new InetSocketAddress(args[1], Integer.parseInt(args[2])), 2000);
                    s.setSoTimeout(2000);
                    s.getOutputStream().write(("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n").getBytes());
                    InputStream in = s.getInputStream();
                    in.read();
                }
            }
        } catch (Exception e) {
            name = e.getClass().getSimpleName();
        }
        System.out.println("RESULT " + name + " " + (System.nanoTime() - t0) / 1000000);
    }
}
