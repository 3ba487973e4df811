#include <stdio.h>

#include "cli/cli.h"
#include "comm/comm.h"
#include "core/version.h"
#include "runtime/device.h"

void cli_print_version(FILE *out)
{
    fprintf(out, "aorta %s (commit %s)\n", AORTA_VERSION, ao_git_commit);
    fprintf(out, "device backends:");
    for (int i = 0; i < ao_device_backend_count(); i++)
        fprintf(out, " %s", ao_device_backend_name(i));
    fprintf(out, "\ncomm backends:");
    for (int i = 0; i < ao_comm_backend_count(); i++) fprintf(out, " %s", ao_comm_backend_name(i));
    fprintf(out, "\n");
    char buf[512];
    for (int i = 0; i < ao_comm_backend_count(); i++) {
        ao_comm_backend_version(i, buf, sizeof buf);
        fprintf(out, "%s: %s\n", ao_comm_backend_name(i), buf);
    }
    for (int i = 0; i < ao_device_backend_count(); i++) {
        ao_device_backend_version(i, buf, sizeof buf);
        fprintf(out, "%s: %s\n", ao_device_backend_name(i), buf);
    }
}
