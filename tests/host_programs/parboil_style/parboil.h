/* Parboil-style benchmark harness declarations (the suite's common library): timers and
 * command-line parameters; the library's code is not part of the benchmark's sources. */
#ifndef PARBOIL_H
#define PARBOIL_H
#ifdef __cplusplus
extern "C" {
#endif
struct pb_Parameters {
    char *outFile;
    char **inpFiles;
    int synchronizeGpu;
};
enum pb_TimerID { pb_TimerID_NONE = 0, pb_TimerID_IO, pb_TimerID_KERNEL, pb_TimerID_COPY,
                  pb_TimerID_DRIVER, pb_TimerID_COMPUTE, pb_TimerID_LAST };
struct pb_Timer {
    int state;
    unsigned long long elapsed, init;
};
struct pb_TimerSet {
    enum pb_TimerID current;
    struct pb_Timer timers[pb_TimerID_LAST];
};
struct pb_Parameters *pb_ReadParameters(int *_argc, char **argv);
void pb_FreeParameters(struct pb_Parameters *p);
int pb_Parameters_CountInputs(struct pb_Parameters *p);
void pb_InitializeTimerSet(struct pb_TimerSet *timers);
void pb_SwitchToTimer(struct pb_TimerSet *timers, enum pb_TimerID timer);
void pb_PrintTimerSet(struct pb_TimerSet *timers);
#ifdef __cplusplus
}
#endif
#endif
