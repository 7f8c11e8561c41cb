// goclient.go - a Go HTTP client for the reach tests: one GET to the URL in
// argv[1] every 200 ms for argv[2] seconds, printing each outcome. Built
// twice by reach.sh, with CGO_ENABLED=0 (static) and with cgo (dynamic).
package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	secs, _ := strconv.Atoi(os.Args[2])
	client := &http.Client{Timeout: 500 * time.Millisecond}
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(end) {
		r, err := client.Get(os.Args[1])
		if err != nil {
			fmt.Println("error", err)
		} else {
			fmt.Println("status", r.StatusCode)
			r.Body.Close()
		}
		time.Sleep(200 * time.Millisecond)
	}
}
