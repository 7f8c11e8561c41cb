/* container.h - faultctl docker and faultctl compose: containers run under
 * the shim, from the self-contained bundle (ctl/bundle.h). */
#ifndef FAULTCTL_CONTAINER_H
#define FAULTCTL_CONTAINER_H

/* argv after "docker" ("run ..." or "check IMAGE"); group from a -g given
 * before the verb (may be NULL). */
int cmd_docker(int argc, char **argv, const char *group);

/* argv after "compose": options, then the services named. */
int cmd_compose(int argc, char **argv, const char *group);

#endif
