// golookup.go - a Go program resolving a name, for dns_test.py: built with
// cgo, it resolves through getaddrinfo when GODEBUG=netdns=cgo (the dns
// rules apply); Go's own resolver (netdns=go) sends its queries with raw
// system calls, which no preloaded library sees.
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
)

func main() {
	addrs, err := net.LookupHost(os.Args[1])
	if err != nil {
		if strings.Contains(err.Error(), "no such host") {
			fmt.Println("no such host")
			return
		}
		fmt.Println("error:", err)
		return
	}
	fmt.Println(strings.Join(addrs, " "))
}
