/*
 * The seed's byte-wise receivers (seed 002), transcribed verbatim as the
 * benchmark's baseline, and compiled with the same flags as firmware_ref/:
 *
 * - GetOneByte: the STM32's command-frame receiver (13 bytes after AA 55),
 *   with its DataDecoder;
 * - the ROS side's odometry receiver (17 bytes after AA 55), the same
 *   machine; the seed writes it inline around ser.read(&buffer, 1), so it is
 *   wrapped here in RosOdomOneByte(buffer) with its variables static.
 *
 * Only additions: the declarations the seed's excerpt leaves out (u8,
 * data_u, data_receive, kinematics, D2R), and SEED_FRAME_HOOK() where a
 * frame is decoded, so the benchmark can count frames. Both faults are kept:
 * "AA AA 55" loses the frame, and a checksum failure drops every byte
 * collected, including a real header inside them.
 */
#include <stdint.h>

#include "seed_getonebyte.h"

typedef uint8_t u8;

typedef union {
    float data;
    uint8_t data8[4];
} data_u;

#define D2R 0.017453292519943295f

static u8 data_receive[32];

static struct {
    struct {
        float linear_x, linear_y, angular_z;
    } exp_vel;
} kinematics;

/* The ROS side's decoded values. */
static float seed_odom[4];

/* The seed's loop `for(int i = 0; i < sizeof(...)/sizeof(...); i++)`
 * compares int with size_t; kept as written. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif

/* ---- verbatim from the seed (STM32 side, 3.3) ---- */

void DataDecoder(u8 *data);

/**
 * @brief 從串口讀取單個字節
 * @param  data             讀取的字節數據
 */
void GetOneByte(uint8_t data)
{
  static u8 state = 0;
  static u8 cnt = 0;
if(state == 0 && data == 0xAA)
  {
    state++;
  }
else if(state == 1 && data == 0x55)
  {
    state++;
  }
else if(state == 2)
  {
    data_receive[cnt++] = data;
if(cnt >= 13)
    {
// 校驗
      u8 checkout = 0;
for(int i = 0; i < cnt - 1; i++)
      {
        checkout += data_receive[i];
      }
if(checkout == data_receive[cnt - 1])
      {
// 校驗通過，進行解碼
        DataDecoder(data_receive);
      }
      state = 0;
      cnt = 0;
    }
  }
else state = 0;
}


/**
 * @brief 數據解碼
 * @param  data             待解碼數組
 */
void DataDecoder(u8 *data)
{
    data_u temp;
// x軸線速度
    temp.data8[0] = data[0];
    temp.data8[1] = data[1];
    temp.data8[2] = data[2];
    temp.data8[3] = data[3];
    kinematics.exp_vel.linear_x = temp.data;
// y軸線速度
    temp.data8[0] = data[4];
    temp.data8[1] = data[5];
    temp.data8[2] = data[6];
    temp.data8[3] = data[7];
    kinematics.exp_vel.linear_y = temp.data;
// z軸角速度
    temp.data8[0] = data[8];
    temp.data8[1] = data[9];
    temp.data8[2] = data[10];
    temp.data8[3] = data[11];
    kinematics.exp_vel.angular_z = temp.data;  
    SEED_FRAME_HOOK();
}

/* ---- verbatim from the seed (ROS side, 2.3), wrapped in a function ---- */

void RosOdomOneByte(uint8_t buffer)
{
static int state = 0;
static int data_cnt = 0;
static uint8_t data_receive[17];
if(state == 0 && buffer == 0xAA)
{
    state++;
}
else if(state == 1 && buffer == 0x55)
{
    state++;
}
else if(state == 2)
{
    data_receive[data_cnt++]=buffer;
if(data_cnt == 17)
    {
/* 進行數據校驗 */
uint8_t checkout = 0;
for(int k = 0; k < data_cnt - 1; k++)
        {
            checkout += data_receive[k];
        }
if(checkout == data_receive[data_cnt - 1]) // 串口接收到的最后一個字節是校驗碼 
        {
/* 校驗通過，進行解碼 */
float vx, vy, vth, th; // x軸線速度，y軸線速度，z軸角速度，偏航角
float* datas_ptr[] = {&vx, &vy, &vth, &th};
            data_u temp;
for(int i = 0; i < sizeof(datas_ptr) / sizeof(float*); i++)
            {
                temp.data8[0] = data_receive[4 * i + 0];
                temp.data8[1] = data_receive[4 * i + 1];
                temp.data8[2] = data_receive[4 * i + 2];
                temp.data8[3] = data_receive[4 * i + 3];              
                *(datas_ptr[i]) = temp.data;
            }
            th *= D2R; // 轉換為弧度
            seed_odom[0] = vx;
            seed_odom[1] = vy;
            seed_odom[2] = vth;
            seed_odom[3] = th;
            SEED_FRAME_HOOK();
        }
        data_cnt = 0;
        state = 0;
    }
}
else state = 0;
}
