/* files.h — the data directory of ETL files: name validation and resolution. */
#ifndef ETWD_FILES_H
#define ETWD_FILES_H
#include "api.h"
/**
 * etwd_file_resolve - check @name (a plain file name: [A-Za-z0-9._-], no leading dot, ends in
 * .etl, at most 200 bytes — anything that could leave the data directory is refused) and return
 * "<data_dir>/<name>" (caller frees). @must_exist: 404 if absent. NULL with @st set on error.
 */
char *etwd_file_resolve(struct etwd_server *s, const char *name, int must_exist, const char *field,
                        struct etw_status *st);
/** etwd_hide_dir - remove "<dir>/" from @st's message: clients see file names, never server paths. */
void etwd_hide_dir(struct etw_status *st, const char *dir);
#endif
