// gohttp.go - a Go HTTP client for the kernel-side backend's HTTP tests
// (tests/bpf/http.sh), built with CGO_ENABLED=0: the shim cannot reach it.
//   gohttp URL: one GET, with its own crypto/tls trusting what Go trusts
//   (SSL_CERT_FILE, else the system's roots); prints the status code, or
//   "error: " and Go's own error.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	c := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true}}
	r, err := c.Get(os.Args[1])
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	fmt.Println(r.StatusCode)
}
