/*
 * Replacing a file so that a reader or a crash sees the old file whole or the new one whole, never a part: the
 * bytes go to a temporary file beside it, are flushed to disk, and the temporary is renamed over the file; then the
 * folder is flushed too, so the rename itself survives a crash.
 */
#ifndef VTS_SAFEFILE_H
#define VTS_SAFEFILE_H

#include <stddef.h>
#include <sys/types.h>

/* The file that takes the place of an existing one keeps its owner, group and mode (mode is for a new file only). */
#define SAFEFILE_KEEP_OWNER 1

/*
 * Writes data (len bytes) as the file at path: a temporary "path.tmp.XXXXXX" beside it, fsync, rename over path,
 * fsync of the folder. The new file has mode whatever the umask; with SAFEFILE_KEEP_OWNER in flags, a file it
 * replaces passes on its owner, group and mode instead. Returns 0, or -errno with a one-line message naming the step
 * and the file in err (errlen bytes). On any failure before the rename the temporary file is removed and path is
 * untouched; a failure after it (the folder's fsync) leaves the new file in place.
 */
int safefile_replace(const char *path, const void *data, size_t len, mode_t mode, int flags, char *err, size_t errlen);

#endif
