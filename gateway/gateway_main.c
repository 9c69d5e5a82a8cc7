#include <stdio.h>
int main(void) { fputs("vts-gateway: not built yet\n", stderr); return 2; }
