/* resolve.c - the resolver's cost: N getaddrinfo calls for one name (and
 * freeaddrinfo), so that callgrind can count what the shim's hook adds with
 * 0 and 1,000 dns rules.
 *
 *   resolve N NAME
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	const char *name = argc > 2 ? argv[2] : "localhost";
	struct addrinfo hints, *res;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	long ok = 0;
	for (long i = 0; i < n; i++)
		if (getaddrinfo(name, "80", &hints, &res) == 0) {
			ok++;
			freeaddrinfo(res);
		}
	printf("%ld of %ld resolved\n", ok, n);
	return ok == n ? 0 : 1;
}
