// gohttp.go - a Go HTTP client for the kernel-side backend's HTTP tests
// (tests/bpf/http.sh), built with CGO_ENABLED=0: the shim cannot reach it.
//   gohttp URL [h2]: one GET, with its own crypto/tls trusting what Go
//   trusts (SSL_CERT_FILE, else the system's roots); prints the status
//   code, or "error: " and Go's own error. With h2 the client offers h2
//   by ALPN (Go's default transport does) and prints the protocol too.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	h2 := len(os.Args) > 2 && os.Args[2] == "h2"
	c := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, ForceAttemptHTTP2: h2}}
	r, err := c.Get(os.Args[1])
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if h2 {
		fmt.Println(r.StatusCode, r.Proto)
		return
	}
	fmt.Println(r.StatusCode)
}
