/* Unit tests of the safe file writer: what it writes, the owner it keeps, and what a failure leaves behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/safefile.h"

struct fx {
  char dir[64];
  char path[128];
};

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof(*f));
  if (f == NULL) return -1;
  snprintf(f->dir, sizeof(f->dir), "/tmp/vts-safefile-XXXXXX");
  if (mkdtemp(f->dir) == NULL) return -1;
  snprintf(f->path, sizeof(f->path), "%s/file", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
  int rc = system(cmd);
  free(f);
  return rc == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(fchmod(fd, mode), 0);
  close(fd);
}

static void assert_file_is(const char *path, const char *want) {
  char got[256] = "";
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  size_t n = fread(got, 1, sizeof(got) - 1, fp);
  fclose(fp);
  got[n] = '\0';
  assert_string_equal(got, want);
}

/* How many entries of dir are not "file" (a temporary left behind). */
static int strays(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  const struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strcmp(e->d_name, "file") != 0) n++;
  closedir(d);
  return n;
}

static void test_a_new_file_has_the_data_and_the_mode_whatever_the_umask(void **state) {
  struct fx *f = *state;
  mode_t old_mask = umask(077);
  char err[256] = "";
  int rc = safefile_replace(f->path, "abc\n", 4, 0640, 0, err, sizeof(err));
  umask(old_mask);
  assert_int_equal(rc, 0);
  assert_string_equal(err, "");
  assert_file_is(f->path, "abc\n");
  struct stat st;
  assert_int_equal(stat(f->path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0640);
  assert_int_equal(strays(f->dir), 0);
}

static void test_a_replaced_file_passes_on_its_owner_and_mode_when_asked(void **state) {
  struct fx *f = *state;
  write_file(f->path, "old", 0604);
  /* Root gives the old file to nobody, so that keeping its owner is seen; anyone else keeps its own. */
  uid_t owner = geteuid() == 0 ? 65534 : geteuid();
  gid_t group = geteuid() == 0 ? 65534 : getegid();
  assert_int_equal(chown(f->path, owner, group), 0);
  char err[256];
  assert_int_equal(safefile_replace(f->path, "new", 3, 0600, SAFEFILE_KEEP_OWNER, err, sizeof(err)), 0);
  struct stat st;
  assert_int_equal(stat(f->path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0604);
  assert_int_equal(st.st_uid, owner);
  assert_int_equal(st.st_gid, group);
  assert_file_is(f->path, "new");
  /* Without the flag the new file is the caller's, with the mode given. */
  assert_int_equal(safefile_replace(f->path, "newer", 5, 0600, 0, err, sizeof(err)), 0);
  assert_int_equal(stat(f->path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  assert_int_equal(st.st_uid, geteuid());
  assert_file_is(f->path, "newer");
  assert_int_equal(strays(f->dir), 0);
}

/*
 * A write that fails half way (the file size limit: EFBIG after 4 bytes) leaves the old file whole and no temporary
 * beside it. Run in a child, whose limit dies with it.
 */
static void test_a_failed_write_leaves_the_old_file_intact(void **state) {
  struct fx *f = *state;
  write_file(f->path, "old contents", 0600);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {4, 4};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(10);
    char err[256] = "";
    int rc = safefile_replace(f->path, "new contents, longer than four bytes", 36, 0600, 0, err, sizeof(err));
    if (rc != -EFBIG) _exit(11);
    if (strncmp(err, "write ", 6) != 0 || strstr(err, ".tmp.") == NULL) _exit(12);
    _exit(0);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  if (WEXITSTATUS(st) != 0)
    fail_msg("child: expected -EFBIG and a message naming the write, got case %d", WEXITSTATUS(st));
  assert_file_is(f->path, "old contents");
  assert_int_equal(strays(f->dir), 0);
}

/* A rename that cannot happen (a folder stands at the path) removes the temporary and leaves the folder as it was. */
static void test_a_failed_rename_removes_the_temporary(void **state) {
  struct fx *f = *state;
  assert_int_equal(mkdir(f->path, 0700), 0);
  char inner[160];
  snprintf(inner, sizeof(inner), "%s/kept", f->path);
  write_file(inner, "kept", 0600);
  char err[256] = "";
  int rc = safefile_replace(f->path, "x", 1, 0600, 0, err, sizeof(err));
  assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
  assert_int_equal(strncmp(err, "rename ", 7), 0);
  assert_file_is(inner, "kept");
  assert_int_equal(strays(f->dir), 0);
}

static void test_a_missing_folder_is_an_error_naming_the_file(void **state) {
  struct fx *f = *state;
  char path[160], err[256] = "";
  snprintf(path, sizeof(path), "%s/absent/file", f->dir);
  assert_int_equal(safefile_replace(path, "x", 1, 0600, 0, err, sizeof(err)), -ENOENT);
  char want[256];
  snprintf(want, sizeof(want), "create a temporary file beside %s: No such file or directory", path);
  assert_string_equal(err, want);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_a_new_file_has_the_data_and_the_mode_whatever_the_umask, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_replaced_file_passes_on_its_owner_and_mode_when_asked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_failed_write_leaves_the_old_file_intact, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_failed_rename_removes_the_temporary, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_missing_folder_is_an_error_naming_the_file, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
