/*
 * pacer.h - the C API of libpacer: adaptive SCHED_DEADLINE reservations for cooperating
 * applications, through `pacer daemon` (unprivileged programs) or in-process (programs that may
 * set SCHED_DEADLINE themselves). Documentation: docs/client.md.
 *
 * Link: cc app.c $(pkg-config --cflags --libs pacer)   (or -lpacer)
 *
 * Errors: functions returning int give >= 0 on success and a negative PACER_E* code on
 * failure; functions returning a pointer give NULL, with the code in pacer_last_error() and a
 * message naming the limit, thread or field in pacer_last_error_message() (per thread).
 *
 * Real-time safety: pacer_session_hint_work_units, pacer_session_job_begin,
 * pacer_session_job_end and pacer_session_report_actual_work_duration are notifications: one
 * non-blocking send of a frame built on the stack, no allocation, no lock, no reply (a full
 * socket buffer gives -PACER_EWOULDBLOCK and the notification is dropped). Job marks also read
 * the thread's CPU clock and, under SCHED_DEADLINE, its remaining runtime and deadline from
 * /proc/self/task/TID/sched (opened at the thread's first mark, the one allocation; then one
 * pread into a stack buffer). Every other call is a
 * round trip: it allocates and waits for one reply (at most 5 s); keep it out of the real-time
 * loop, except pacer_session_sync when a new budget must be in force before the next job.
 */
#ifndef PACER_H
#define PACER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PACER_PROTOCOL_VERSION 1

/* Error codes (returned negated). 1-12 come from the daemon, 20-26 from the library. */
#define PACER_EVERSION 1       /* the daemon speaks another protocol version */
#define PACER_EMALFORMED 2     /* malformed message */
#define PACER_ETOOLARGE 3      /* message too large */
#define PACER_EORDER 4         /* request out of order */
#define PACER_ENOTYOURS 5      /* the thread does not belong to the caller */
#define PACER_ENOTHREAD 6      /* no such thread */
#define PACER_ENOSESSION 7     /* no such session */
#define PACER_EQUOTA 8         /* over the caller's quota (bandwidth, sessions, minimum period) */
#define PACER_EADMISSION 9     /* admission control refused: the root domain is full */
#define PACER_EINVAL 10        /* invalid argument */
#define PACER_EUNSUPPORTED 11  /* not supported by this kernel or configuration */
#define PACER_EKERNEL 12       /* a kernel operation failed */
#define PACER_ECONNECT 20      /* cannot connect to the daemon */
#define PACER_EIO 21           /* I/O error on the connection */
#define PACER_ETIMEDOUT 22     /* no reply in time */
#define PACER_ECLOSED 23       /* the connection is closed */
#define PACER_EWOULDBLOCK 24   /* notification dropped: the connection's buffer is full */
#define PACER_EPROTOCOL 25     /* unexpected reply */
#define PACER_EINPROCESS 26    /* the in-process service could not start */

/* Controllers for pacer_session_create_ex. */
#define PACER_CONTROLLER_PROACTIVE 0 /* workUnits hints + measured jobs (audio paper, eq. 3-5) */
#define PACER_CONTROLLER_JOB 1       /* percentile of measured jobs (LFS++ section 7.3) */

typedef struct PacerClient pacer_client;
typedef struct PacerSession pacer_session;

/* Connects. socket_path NULL: $PACER_SOCKET, else /run/pacer/pacer.sock; when no daemon listens
 * and the caller may set SCHED_DEADLINE itself (root or CAP_SYS_NICE), the in-process service.
 * "inprocess" asks for the in-process service explicitly. NULL on failure. */
pacer_client *pacer_connect(const char *socket_path);
/* The in-process service (a thread of this process; needs root or CAP_SYS_NICE). */
pacer_client *pacer_connect_in_process(void);
/* 1 if the client hosts the service in-process, 0 if it talks to a daemon. */
int pacer_client_in_process(const pacer_client *c);
/* Frees the handle; open sessions keep the connection until they are closed. */
void pacer_disconnect(pacer_client *c);

/* A periodic session (deadline = period) for threads of the caller, proactive controller.
 * The threads are reserved at once (the per-thread ceiling until jobs have been measured). */
pacer_session *pacer_session_create(pacer_client *c, const pid_t *tids, size_t n_tids,
                                    int64_t period_ns);
/* The same with a controller (PACER_CONTROLLER_*) and a per-thread bandwidth ceiling
 * (Q/P in (0, 1]; 0 = the daemon's default for the caller), counted against the quota. */
pacer_session *pacer_session_create_ex(pacer_client *c, const pid_t *tids, size_t n_tids,
                                       int64_t period_ns, int controller, double max_bandwidth);
/* The coming jobs' load in work units (notification). */
int pacer_session_hint_work_units(pacer_session *s, uint32_t work_units);
/* The calling thread begins / ends a job (notifications). */
int pacer_session_job_begin(pacer_session *s);
int pacer_session_job_end(pacer_session *s);
/* A job of the calling thread took ns of CPU time (Android ADPF style; notification). */
int pacer_session_report_actual_work_duration(pacer_session *s, int64_t ns);
/* Waits until every notification sent so far is applied (round trip); returns the number of
 * notifications refused since the previous sync (the last one's message in
 * pacer_last_error_message()), or a negative code. */
int pacer_session_sync(pacer_session *s);
/* Gives the threads their original scheduling back and frees the handle. */
int pacer_session_close(pacer_session *s);

/* Interactive boost of one of the caller's threads for duration_ns (VT-CFS, framework-assisted;
 * undone early when the thread blocks). */
int pacer_boost(pacer_client *c, pid_t tid, int64_t duration_ns);

/* A static description of a negative error code. */
const char *pacer_strerror(int err);
/* The calling thread's last failure: code and message (valid until its next failure). */
int pacer_last_error(void);
const char *pacer_last_error_message(void);

#ifdef __cplusplus
}
#endif

#endif /* PACER_H */
