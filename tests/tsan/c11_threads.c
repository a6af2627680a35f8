/*
 * ThreadSanitizer builds only (INBOX_TSAN, linked into every target): C11
 * threads on top of the pthread functions TSan intercepts.
 *
 * librdkafka creates its threads and takes its locks with C11 thrd_create,
 * mtx_lock, cnd_wait... glibc implements those by calling its pthread
 * internals directly, which no sanitizer intercepts (neither GCC 12's nor
 * LLVM 14's runtime has thrd_* interceptors). So librdkafka's threads
 * were unknown to TSan — its runtime crashed at their first malloc — and
 * its locks invisible. Defined here, in the executable, these override
 * glibc's for every library of the process and do what glibc does (glibc's
 * mtx_t, cnd_t and once_flag are its pthread_mutex_t, pthread_cond_t and
 * pthread_once_t), through the interceptable pthread entry points.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

static int thrd_rc(int rc)
{
	switch (rc) {
	case 0:
		return thrd_success;
	case ENOMEM:
		return thrd_nomem;
	case EBUSY:
		return thrd_busy;
	case ETIMEDOUT:
		return thrd_timedout;
	default:
		return thrd_error;
	}
}

typedef struct start {
	thrd_start_t fn;
	void *arg;
} start;

static void *run(void *p)
{
	start s = *(start *)p;
	free(p);
	return (void *)(intptr_t)s.fn(s.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t fn, void *arg)
{
	start *s = malloc(sizeof(*s));
	if (!s)
		return thrd_nomem;
	s->fn = fn;
	s->arg = arg;
	int rc = pthread_create((pthread_t *)thr, NULL, run, s);
	if (rc != 0)
		free(s);
	return thrd_rc(rc);
}

int thrd_join(thrd_t thr, int *res)
{
	void *ret;
	int rc = pthread_join((pthread_t)thr, &ret);
	if (rc == 0 && res)
		*res = (int)(intptr_t)ret;
	return thrd_rc(rc);
}

int thrd_detach(thrd_t thr)
{
	return thrd_rc(pthread_detach((pthread_t)thr));
}

_Noreturn void thrd_exit(int res)
{
	pthread_exit((void *)(intptr_t)res);
}

int mtx_init(mtx_t *m, int type)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	if (type & mtx_recursive)
		pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	int rc = pthread_mutex_init((pthread_mutex_t *)m, &a);
	pthread_mutexattr_destroy(&a);
	return thrd_rc(rc);
}

int mtx_lock(mtx_t *m)
{
	return thrd_rc(pthread_mutex_lock((pthread_mutex_t *)m));
}

int mtx_trylock(mtx_t *m)
{
	return thrd_rc(pthread_mutex_trylock((pthread_mutex_t *)m));
}

int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict ts)
{
	return thrd_rc(pthread_mutex_timedlock((pthread_mutex_t *)m, ts));
}

int mtx_unlock(mtx_t *m)
{
	return thrd_rc(pthread_mutex_unlock((pthread_mutex_t *)m));
}

void mtx_destroy(mtx_t *m)
{
	pthread_mutex_destroy((pthread_mutex_t *)m);
}

int cnd_init(cnd_t *c)
{
	return thrd_rc(pthread_cond_init((pthread_cond_t *)c, NULL));
}

int cnd_signal(cnd_t *c)
{
	return thrd_rc(pthread_cond_signal((pthread_cond_t *)c));
}

int cnd_broadcast(cnd_t *c)
{
	return thrd_rc(pthread_cond_broadcast((pthread_cond_t *)c));
}

int cnd_wait(cnd_t *c, mtx_t *m)
{
	return thrd_rc(
	    pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m,
                  const struct timespec *restrict ts)
{
	return thrd_rc(pthread_cond_timedwait((pthread_cond_t *)c,
	                                      (pthread_mutex_t *)m, ts));
}

void cnd_destroy(cnd_t *c)
{
	pthread_cond_destroy((pthread_cond_t *)c);
}

void call_once(once_flag *flag, void (*fn)(void))
{
	pthread_once((pthread_once_t *)flag, fn);
}
