/*
 * The one way a unit test skips for a missing tool or fixture: the reason is printed and appended to $VTS_SKIP_LOG
 * (tests/run.sh counts those lines in its summary), and under CI=true the skip is a failure instead, so a machine
 * without what a test needs cannot pass for green. TEST_SKIP needs <cmocka.h>.
 */
#ifndef VTS_TEST_SKIP_H
#define VTS_TEST_SKIP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Records a skip of file's test for why. Returns whether the skip must fail instead (CI=true). */
static inline int test_skip_record(const char *file, const char *why) {
  const char *base = strrchr(file, '/');
  base = base != NULL ? base + 1 : file;
  printf("skipped: %s\n", why);
  const char *log = getenv("VTS_SKIP_LOG");
  FILE *f = log != NULL && log[0] != '\0' ? fopen(log, "a") : NULL;
  if (f != NULL) {
    fprintf(f, "%s: %s\n", base, why);
    fclose(f);
  }
  const char *ci = getenv("CI");
  return ci != NULL && strcasecmp(ci, "true") == 0;
}

/* Skips the running test with a printf-style reason, or fails it under CI=true. */
#define TEST_SKIP(...)                                                                                               \
  do {                                                                                                               \
    char why_[256];                                                                                                  \
    snprintf(why_, sizeof(why_), __VA_ARGS__);                                                                       \
    if (test_skip_record(__FILE__, why_)) fail_msg("skipped under CI=true, which makes a skip a failure: %s", why_); \
    skip();                                                                                                          \
  } while (0)

#endif
