/* util.h — small portable helpers shared by the core and the server. */
#ifndef ETWCORE_UTIL_H
#define ETWCORE_UTIL_H

/** etw_mkdirs - create @path and its missing parents with mode 0700 (like mkdir -p).
 *  Returns 0, or -1 with errno set. */
int etw_mkdirs(const char *path);

#endif
