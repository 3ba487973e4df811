/* LOCAL ONLY, never committed: lets the aorta binary link in the config branch. */
#include <stdio.h>
#include "comm/comm.h"
#include "runtime/device.h"
int ao_device_backend_count(void) { return 0; }
const char *ao_device_backend_name(int i) { (void)i; return "none"; }
void ao_device_backend_version(int i, char *buf, size_t n) { (void)i; snprintf(buf, n, "none"); }
int ao_comm_backend_count(void) { return 0; }
const char *ao_comm_backend_name(int i) { (void)i; return "none"; }
void ao_comm_backend_version(int i, char *buf, size_t n) { (void)i; snprintf(buf, n, "none"); }
