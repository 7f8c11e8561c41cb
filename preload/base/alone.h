/* alone.h - the shim is never what keeps a process alive. */
#ifndef FAULTNET_ALONE_H
#define FAULTNET_ALONE_H

/* Ends the process with exit(0) when every thread left is one of the
 * shim's own (named faultnet-*): the app's last thread has then ended with
 * pthread_exit, which without the shim would have ended the process with
 * status 0 (a fork child of a non-main thread whose thread returns, say).
 * The shim's threads call it as they wake; it looks at most every 200 ms. */
void fn_end_if_alone(void);

#endif
