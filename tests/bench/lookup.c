/* lookup.c - rule lookup cost: builds a policy of N CIDR rules (none of
 * which cover the destination but the last) and looks up one destination K
 * times. Run under callgrind with --toggle-collect=fn_policy_match, the
 * instructions divided by K are the cost of one lookup for a matched
 * connect at that rule count.
 *
 *   lookup N K
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000, k = argc > 2 ? atol(argv[2]) : 1000;
	size_t cap = (size_t)n * 96 + 64, at = 0;
	char *text = malloc(cap);
	at += (size_t)snprintf(text, cap, "rules = (\n");
	for (long i = 0; i < n; i++) {
		/* Distinct loopback /32s from 127.100.0.0 up; the last is the target. */
		at += (size_t)snprintf(text + at, cap - at,
				       "{ name = \"r%ld\"; action = \"refuse\"; match = { to = "
				       "\"127.%ld.%ld.%ld/32\"; }; }%s\n",
				       i, 100 + ((i >> 16) & 255), (i >> 8) & 255, i & 255,
				       i + 1 < n ? "," : "");
	}
	snprintf(text + at, cap - at, ");\n");
	char err[512];
	struct fn_policy *p = fn_config_load_string(text, "lookup", NULL, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(443)};
	long last = n - 1;
	char ip[32];
	snprintf(ip, sizeof(ip), "127.%ld.%ld.%ld", 100 + ((last >> 16) & 255), (last >> 8) & 255,
		 last & 255);
	inet_pton(AF_INET, ip, &sa.sin_addr);
	struct fn_endpoint ep;
	fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&sa, sizeof(sa));
	long hits = 0;
	for (long i = 0; i < k; i++)
		hits += fn_policy_match(p, &ep, FN_PROTO_TCP, NULL) != NULL;
	printf("%ld rules, %ld lookups, %ld hits\n", n, k, hits);
	fn_policy_free(p);
	free(text);
	return hits == k ? 0 : 1;
}
