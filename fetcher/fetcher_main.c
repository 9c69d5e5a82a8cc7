#include <stdio.h>
int main(void) { fputs("vts-fetcher: not built yet\n", stderr); return 2; }
