/* The seed's receivers as the benchmark's baseline (seed_getonebyte.c). */
#ifndef SEED_GETONEBYTE_H
#define SEED_GETONEBYTE_H

#include <stdint.h>

/* Called once per frame the seed's code decodes (the benchmark counts). */
void seed_on_frame(void);
#define SEED_FRAME_HOOK() seed_on_frame()

void GetOneByte(uint8_t data);          /* command frames, 15 bytes */
void RosOdomOneByte(uint8_t buffer);    /* odometry frames, 19 bytes */

#endif
