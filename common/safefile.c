#include "common/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The longest path a file replaced here may have. */
#define SAFEFILE_MAX_PATH 4096

/* fsync of the folder that holds path, so the rename itself survives a crash. */
static int sync_dir_of(const char *path) {
  char copy[SAFEFILE_MAX_PATH];
  size_t n = strlen(path);
  if (n >= sizeof(copy)) return -ENAMETOOLONG;
  memcpy(copy, path, n + 1);
  int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return rc;
}

/* Writes all of data to fd. Returns 0, or -errno. */
static int write_all(int fd, const char *data, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    off += (size_t)w;
  }
  return 0;
}

static void set_err(char *err, size_t errlen, const char *what, const char *file, int rc) {
  if (err != NULL && errlen > 0) snprintf(err, errlen, "%s %s: %s", what, file, strerror(-rc));
}

int safefile_replace(const char *path, const void *data, size_t len, mode_t mode, int flags, char *err, size_t errlen) {
  char tmp[SAFEFILE_MAX_PATH];
  if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= sizeof(tmp)) {
    set_err(err, errlen, "path too long:", path, -ENAMETOOLONG);
    return -ENAMETOOLONG;
  }
  struct stat old;
  int had_old = 0;
  if ((flags & SAFEFILE_KEEP_OWNER) != 0) {
    had_old = stat(path, &old) == 0;
    if (!had_old && errno != ENOENT) {
      int rc = -errno;
      set_err(err, errlen, "stat", path, rc);
      return rc;
    }
    if (had_old) mode = old.st_mode & 07777;
  }
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    int rc = -errno;
    set_err(err, errlen, "create a temporary file beside", path, rc);
    return rc;
  }
  const char *step = "chown";
  int rc = !had_old || fchown(fd, old.st_uid, old.st_gid) == 0 ? 0 : -errno;
  if (rc == 0) {
    step = "chmod"; /* after chown, which may clear set-id bits; whatever the umask */
    rc = fchmod(fd, mode) == 0 ? 0 : -errno;
  }
  if (rc == 0) {
    step = "write";
    rc = write_all(fd, data, len);
  }
  if (rc == 0) {
    step = "fsync";
    rc = fsync(fd) == 0 ? 0 : -errno;
  }
  step = rc == 0 ? "close" : step;
  int closed = close(fd) == 0 ? 0 : -errno;
  if (rc == 0) rc = closed;
  if (rc == 0) {
    step = "rename";
    rc = rename(tmp, path) == 0 ? 0 : -errno;
  }
  if (rc != 0) {
    set_err(err, errlen, step, tmp, rc);
    unlink(tmp);
    return rc;
  }
  rc = sync_dir_of(path);
  if (rc != 0) set_err(err, errlen, "fsync the directory of", path, rc);
  return rc;
}
