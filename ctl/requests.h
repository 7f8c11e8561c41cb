/* requests.h - faultctl requests: the request log a run wrote
 * (FAULTNET_REQUESTS) read back, filtered, followed, summed per logical
 * call, or exported as HAR 1.2. */
#ifndef FAULTCTL_REQUESTS_H
#define FAULTCTL_REQUESTS_H

#include <stdbool.h>

/* argv after "requests"; version names faultnet in a HAR's creator. */
int cmd_requests(int argc, char **argv, bool json, const char *version);

#endif
