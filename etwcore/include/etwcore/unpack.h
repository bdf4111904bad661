/* unpack.h — compressed ETL inputs: gzip (.gz, .etlgz) and zip (.zip, e.g. PerfView's .etl.zip),
 * recognised by their first bytes and decompressed to a file with a bound on the output size
 * (zip bombs stop there). zlib for gzip, Debian's minizip for zip; a build without them
 * (ETWD_UNPACK undefined, e.g. the Windows cross build) refuses compressed inputs clearly.
 * No state: any thread. */
#ifndef ETWCORE_UNPACK_H
#define ETWCORE_UNPACK_H

#include <stddef.h>
#include <stdint.h>

enum etw_pack { ETW_PACK_NONE = 0, ETW_PACK_GZIP = 1, ETW_PACK_ZIP = 2 };

/** etw_pack_kind_file - what the file at @path is, by its first bytes (NONE if unreadable). */
enum etw_pack etw_pack_kind_file(const char *path);

/**
 * etw_unpack_file - decompress @in (of @kind) into @out (created with mode 0600, replaced):
 * gzip: all its members; zip: the first entry whose name ends in ".etl", else its only entry.
 * @name (may be NULL) gets the base name of the file inside (zip entry; gzip: @in's name
 * without ".gz", ".etlgz" becoming ".etl"). Writes at most @max bytes.
 * Returns 0; 1 if the output would exceed @max (@out removed); -1 with @err (@out removed).
 */
int etw_unpack_file(const char *in, enum etw_pack kind, const char *out, uint64_t max, char *name,
                    size_t namecap, char *err, size_t errlen);

#endif
