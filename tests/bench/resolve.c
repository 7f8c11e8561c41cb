/* resolve.c - the resolver's cost: N getaddrinfo calls for one name (and
 * freeaddrinfo), so that callgrind can count what the shim's hook adds with
 * 0 and 1,000 dns rules. NAME may be two names with a comma between them:
 * the calls alternate, so that no call looks up the name the one before
 * it did.
 *
 *   resolve N NAME[,NAME2]
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	const char *arg = argc > 2 ? argv[2] : "localhost";
	char names[2][256];
	const char *comma = strchr(arg, ',');
	snprintf(names[0], sizeof(names[0]), "%.*s", comma ? (int)(comma - arg) : (int)strlen(arg),
		 arg);
	snprintf(names[1], sizeof(names[1]), "%s", comma ? comma + 1 : arg);
	struct addrinfo hints, *res;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	long ok = 0;
	for (long i = 0; i < n; i++)
		if (getaddrinfo(names[i & 1], "80", &hints, &res) == 0) {
			ok++;
			freeaddrinfo(res);
		}
	printf("%ld of %ld resolved\n", ok, n);
	return ok == n ? 0 : 1;
}
