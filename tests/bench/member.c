/* member.c - the control benchmark's group member: a process that joins
 * its group at once (its first IP socket is a covered call: the shim joins
 * there, not at start) and then waits to be killed, as small as a process
 * under the shim can be, so that 4,096 of them fit in memory. */
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return 1;
	for (;;)
		pause();
}
