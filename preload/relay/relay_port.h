/* relay_port.h - the relay's connection to the peer from the app's own
 * port (relay_port.c). */
#ifndef FN_RELAY_PORT_H
#define FN_RELAY_PORT_H

#include <stdbool.h>

enum fn_port {
	FN_PORT_NONE,	  /* neither: up leaves from a port of its own */
	FN_PORT_UP_BOUND, /* up is bound to the port the app's socket holds */
	FN_PORT_APP_FREE, /* the app's socket holds no port yet */
};

/* Before up connects: sets SO_REUSEADDR on up and, when the app's socket
 * holds a port of its own (it bound one), binds up to the app's address
 * and port. */
enum fn_port fn_port_bind_up(int appfd, int up);

/* After up connected (or is connecting) from a port the kernel picked,
 * FN_PORT_APP_FREE: binds the app's socket to that port, so that its own
 * connect leaves from it. True if done; false leaves the app's socket as it
 * was. */
bool fn_port_give_app(int appfd, int up);

#endif
