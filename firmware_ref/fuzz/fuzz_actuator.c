/*
 * fuzz_actuator.c - every 8 bytes unpack and pack back to themselves.
 */
#include "fuzz_util.h"
#include "fw_actuator.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t i;
    for (i = 0; i + FW_ACTUATOR_SIZE <= size; i += FW_ACTUATOR_SIZE) {
        fw_actuator a, b;
        uint8_t out[FW_ACTUATOR_SIZE];
        fw_actuator_unpack(data + i, &a);
        fw_actuator_pack(&a, out);
        FUZZ_CHECK(memcmp(out, data + i, FW_ACTUATOR_SIZE) == 0);
        fw_actuator_unpack(out, &b);
        FUZZ_CHECK(memcmp(&a, &b, sizeof a) == 0);
        FUZZ_CHECK((data[i] < 128u) == (a.angle >= 0));
    }
    return 0;
}
