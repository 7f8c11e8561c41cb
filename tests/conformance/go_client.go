// go_client.go - the conformance suite's Go client: one GET of argv[1] with
// net/http, dial timeout 2 s and response-header timeout 2 s, the body read
// whole. Prints "RESULT <outcome> <ms>", the outcome named from Go's own
// error. Built with CGO_ENABLED=0 (static) and with cgo by the suite, and
// run under the kernel-side backend, which is how faultnet reaches Go.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

// name names err by its errno where it has one. net/http does not always
// wrap a failed write of the request (its text keeps the errno's words,
// its chain does not), so the text is read too.
func name(err error) string {
	var ne net.Error
	text := err.Error()
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(text, "connection refused"):
		return "ECONNREFUSED"
	case errors.Is(err, syscall.ECONNRESET) || strings.Contains(text, "connection reset by peer"):
		return "ECONNRESET"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case strings.Contains(err.Error(), "dial tcp") && errors.As(err, &ne) && ne.Timeout():
		return "dial-timeout"
	case errors.As(err, &ne) && ne.Timeout():
		return "read-timeout"
	}
	return "error:" + strings.ReplaceAll(text, " ", "_")
}

func main() {
	t0 := time.Now()
	c := &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		ResponseHeaderTimeout: 2 * time.Second,
	}, Timeout: 6 * time.Second}
	out := "ok"
	r, err := c.Get(os.Args[1])
	if err == nil {
		_, err = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	if err != nil {
		out = name(err)
	}
	fmt.Printf("RESULT %s %d\n", out, time.Since(t0).Milliseconds())
}
