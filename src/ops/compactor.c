/*-------------------------------------------------------------------------
 *
 * compactor.c
 *	  The compaction helper process (tms_compactor) from the worker's side:
 *	  start it, talk to it through pipes, stop it (compactor.h).
 *
 * The helper is installed beside the library as $libdir/tms/tms_compactor
 * with the libduckdb.so it links.  It runs DuckDB out of the server's
 * address space: a crash, a bug or an out-of-memory in DuckDB ends that
 * process and fails the job, never a backend.
 *
 * Start: a temporary directory of its own, below tms.compaction_temp_directory
 * or the database's pgsql_tmp (named pgsql_tmp_tms_compactor_<pid>_<job>,
 * so that a server restart removes what a crash left there); the helper is
 * spawned (posix_spawn: no fork of the backend's memory, every descriptor
 * but its three pipes closed, default signal dispositions) with the
 * worker's pid as its argument (it dies with the worker: PR_SET_PDEATHSIG);
 * the hello carries the storage (credentials go through the pipe, never
 * the command line or the environment), the memory limit, the threads and
 * the directory.
 *
 * Talking: the pipes are non-blocking; every wait is a WaitLatchOrSocket
 * of at most a second, between which the run is checked (interrupts, the
 * lease, a cancel request: maint_keep_going) and the helper's silence
 * (COMPACTOR_SILENCE_S) and the job's deadline measured.  A line longer
 * than ICEBERG_COMPACT_MAX_LINE, a malformed one, an end of output or a
 * silent helper ends the job with last_error (the helper's last stderr
 * lines included, bounded, with control characters replaced).
 *
 * Stop: SIGKILL, reaped (waitpid, bounded), the directory removed
 * (rmtree).  The caller runs it in PG_FINALLY, so an error never leaves a
 * helper behind.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "bridge/settings.h"
#include "ops/compactor.h"
#include "sched/lease.h"

extern char **environ;

int			tms_compaction_memory_limit_mb = 1024;
int			tms_compaction_threads = 2;
char	   *tms_compaction_temp_directory = NULL;

#define STDERR_KEEP 2048

struct Compactor
{
	pid_t		pid;
	int			to;				/* its stdin */
	int			from;			/* its stdout */
	int			err;			/* its stderr */
	char	   *dir;			/* its temporary directory */
	StringInfoData in;			/* bytes read, not yet a line */
	char		stderr_tail[STDERR_KEEP];
	size_t		stderr_len;
	TimestampTz last_heard;
	bool		exited;
	int			status;
	int			groups;			/* groups it takes in flight at once */
};

const char *
tms_compactor_path(void)
{
	static char path[MAXPGPATH];

	snprintf(path, sizeof(path), "%s/tms/tms_compactor", pkglib_path);
	return access(path, X_OK) == 0 ? path : NULL;
}

int
compactor_pid(const Compactor *c)
{
	return c && !c->exited ? (int) c->pid : 0;
}

/* Keep the last bytes of the helper's stderr. */
static void
drain_stderr(Compactor *c)
{
	char		buf[4096];
	ssize_t		n;

	while (c->err >= 0 && (n = read(c->err, buf, sizeof(buf))) > 0)
	{
		if ((size_t) n >= STDERR_KEEP)
		{
			memcpy(c->stderr_tail, buf + n - (STDERR_KEEP - 1), STDERR_KEEP - 1);
			c->stderr_len = STDERR_KEEP - 1;
			continue;
		}
		if (c->stderr_len + (size_t) n >= STDERR_KEEP)
		{
			size_t		drop = c->stderr_len + (size_t) n - (STDERR_KEEP - 1);

			memmove(c->stderr_tail, c->stderr_tail + drop, c->stderr_len - drop);
			c->stderr_len -= drop;
		}
		memcpy(c->stderr_tail + c->stderr_len, buf, (size_t) n);
		c->stderr_len += (size_t) n;
	}
}

/* Its stderr tail, printable, for a message. */
static const char *
stderr_text(Compactor *c)
{
	static char out[STDERR_KEEP];
	size_t		i;

	drain_stderr(c);
	for (i = 0; i < c->stderr_len; i++)
	{
		unsigned char ch = (unsigned char) c->stderr_tail[i];

		out[i] = (ch < 0x20 || ch == 0x7f) ? ' ' : (char) ch;
	}
	out[c->stderr_len] = '\0';
	return out;
}

/* Reap without blocking for long: true when it exited (status kept). */
static bool
reap(Compactor *c, int wait_ms)
{
	for (int waited = 0;; waited += 10)
	{
		int			status;
		pid_t		r = waitpid(c->pid, &status, WNOHANG);

		if (r == c->pid || (r < 0 && errno == ECHILD))
		{
			c->exited = true;
			c->status = r == c->pid ? status : 0;
			return true;
		}
		if (waited >= wait_ms)
			return false;
		pg_usleep(10 * 1000L);
	}
}

/* How the helper ended, for a message. */
static const char *
exit_text(Compactor *c)
{
	static char buf[128];

	if (!c->exited && !reap(c, 2000))
		return "it stopped answering";
	if (WIFSIGNALED(c->status))
		snprintf(buf, sizeof(buf), "it was killed by signal %d%s", WTERMSIG(c->status),
				 WTERMSIG(c->status) == SIGKILL ? " (out of memory, or killed)" : "");
	else
		snprintf(buf, sizeof(buf), "it exited with status %d", WEXITSTATUS(c->status));
	return buf;
}

/* Fail the run with the helper's end; it is killed. */
static void
helper_failed(Compactor *c, MaintRun *run, const char *what)
{
	const char *tail;

	if (!c->exited)
		kill(c->pid, SIGKILL);
	tail = stderr_text(c);
	maint_fail(run, MAINT_TRANSIENT, "the compaction helper failed: %s; %s%s%s", what,
			   exit_text(c), tail[0] ? ": " : "", tail);
}

void
compactor_stop(Compactor *c)
{
	if (c == NULL)
		return;
	if (!c->exited)
	{
		kill(c->pid, SIGKILL);
		(void) reap(c, 5000);
	}
	if (c->to >= 0)
		close(c->to);
	if (c->from >= 0)
		close(c->from);
	if (c->err >= 0)
		close(c->err);
	c->to = c->from = c->err = -1;
	if (c->dir)
		(void) rmtree(c->dir, true);
	c->dir = NULL;
}

/* The temporary directory of job job_id (created, owner only). */
static char *
make_dir(MaintRun *run)
{
	char	   *base;
	char	   *dir;

	if (tms_compaction_temp_directory && tms_compaction_temp_directory[0] != '\0')
		base = pstrdup(tms_compaction_temp_directory);
	else
	{
		base = psprintf("%s/base/pgsql_tmp", DataDir);
		(void) MakePGDirectory(base);
	}
	dir = psprintf("%s/pgsql_tmp_tms_compactor_%d_" INT64_FORMAT, base, MyProcPid, run->job_id);
	{
		struct stat sb;

		if (stat(dir, &sb) == 0)	/* left by a dead run of this worker's pid */
			(void) rmtree(dir, true);
	}
	if (MakePGDirectory(dir) != 0 || chmod(dir, S_IRWXU) != 0)
	{
		maint_fail(run, MAINT_TRANSIENT, "cannot create the compaction directory \"%s\": %m", dir);
		return NULL;
	}
	return dir;
}

static bool
nonblock(int fd)
{
	int			fl = fcntl(fd, F_GETFL);

	return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0 &&
		fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
}

Compactor *
compactor_start(MaintRun *run, const IoStorageConfig *storage, int groups)
{
	const char *path = tms_compactor_path();
	Compactor  *c;
	int			in[2] = {-1, -1},
				out[2] = {-1, -1},
				er[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t	none,
				all;
	char		ppid[32];
	char	   *argv[3];
	char	   *hello;
	TmsError	ierr;
	IcebergCompactMessage m;
	int			rc;

	if (path == NULL)
	{
		maint_fail(run, MAINT_TERMINAL,
				   "the compaction helper is not installed (tms was built without libduckdb)");
		return NULL;
	}
	c = palloc0(sizeof(Compactor));
	c->to = c->from = c->err = -1;
	initStringInfo(&c->in);
	c->dir = make_dir(run);
	if (c->dir == NULL)
		return NULL;
	if (pipe(in) != 0 || pipe(out) != 0 || pipe(er) != 0)
	{
		maint_fail(run, MAINT_TRANSIENT, "cannot create pipes for the compaction helper: %m");
		goto fail;
	}
	snprintf(ppid, sizeof(ppid), "%d", (int) MyProcPid);
	argv[0] = (char *) path;
	argv[1] = ppid;
	argv[2] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
	posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, er[1], STDERR_FILENO);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawn(&c->pid, path, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(in[0]);
	close(out[1]);
	close(er[1]);
	in[0] = out[1] = er[1] = -1;
	c->to = in[1];
	c->from = out[0];
	c->err = er[0];
	if (rc != 0)
	{
		c->exited = true;
		errno = rc;
		maint_fail(run, MAINT_TRANSIENT, "cannot start the compaction helper \"%s\": %m", path);
		goto fail;
	}
	if (!nonblock(c->to) || !nonblock(c->from) || !nonblock(c->err))
	{
		maint_fail(run, MAINT_TRANSIENT, "cannot set up the pipes of the compaction helper: %m");
		goto fail;
	}
	c->last_heard = GetCurrentTimestamp();
	hello = iceberg_compact_hello_json(storage, (int64) tms_compaction_memory_limit_mb * 1024 * 1024,
									   tms_compaction_threads, Max(groups, 1), c->dir,
									   tms_allowed_hosts, &ierr);
	if (hello == NULL)
	{
		maint_fail(run, MAINT_TRANSIENT, "cannot start the compaction helper: %s", ierr.message);
		goto fail;
	}
	rc = compactor_send(c, run, hello);
	explicit_bzero(hello, strlen(hello));
	io_free(hello);
	if (!rc || !compactor_next(c, run, 0, &m))
		goto fail;
	if (m.type != ICEBERG_MSG_READY || m.protocol != ICEBERG_COMPACT_PROTOCOL)
	{
		iceberg_compact_message_free(&m);
		helper_failed(c, run, "it did not answer the hello as this version of tms expects");
		goto fail;
	}
	c->groups = Max(Min(m.groups, Max(groups, 1)), 1);
	elog(DEBUG1, "compaction helper %d ready (DuckDB %s, %d groups at once)", (int) c->pid,
		 m.version ? m.version : "?", c->groups);
	iceberg_compact_message_free(&m);
	return c;
fail:
	for (int i = 0; i < 2; i++)
	{
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
		if (er[i] >= 0)
			close(er[i]);
	}
	if (c->pid == 0)
		c->exited = true;
	compactor_stop(c);
	return NULL;
}

/* Wait up to ms for fd to be ready (or the latch); false when the run must stop. */
static bool
wait_fd(Compactor *c, MaintRun *run, int fd, bool write, TimestampTz deadline)
{
	int			ev;
	long		ms = 1000;

	if (!maint_keep_going(run))
		return false;
	if (deadline > 0 && GetCurrentTimestamp() >= deadline)
	{
		helper_failed(c, run, "the run took longer than tms.engine_run_timeout");
		return false;
	}
	if (TimestampDifferenceExceeds(c->last_heard, GetCurrentTimestamp(), COMPACTOR_SILENCE_S * 1000))
	{
		helper_failed(c, run, psprintf("it was silent for %d seconds", COMPACTOR_SILENCE_S));
		return false;
	}
	ev = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
						   (write ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE),
						   fd, ms, PG_WAIT_EXTENSION);
	if (ev & WL_LATCH_SET)
		ResetLatch(MyLatch);
	drain_stderr(c);
	return true;
}

bool
compactor_send(Compactor *c, MaintRun *run, const char *line)
{
	size_t		len = strlen(line);
	size_t		off = 0;
	bool		nl = false;

	while (off < len || !nl)
	{
		const char *p = off < len ? line + off : "\n";
		size_t		n = off < len ? len - off : 1;
		ssize_t		w = write(c->to, p, n);

		if (w > 0)
		{
			if (off < len)
				off += (size_t) w;
			else
				nl = true;
			c->last_heard = GetCurrentTimestamp();
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		{
			helper_failed(c, run, "it stopped reading");
			return false;
		}
		if (!wait_fd(c, run, c->to, true, 0))
		{
			if (!c->exited)
				kill(c->pid, SIGKILL);
			return false;
		}
	}
	return true;
}

bool
compactor_next(Compactor *c, MaintRun *run, TimestampTz deadline, IcebergCompactMessage *m)
{
	TmsError	err;

	for (;;)
	{
		char	   *nl = c->in.len > 0 ? memchr(c->in.data, '\n', c->in.len) : NULL;

		if (nl != NULL)
		{
			size_t		len = (size_t) (nl - c->in.data);
			bool		ok;

			ok = iceberg_compact_message_parse(c->in.data, len, (int64) 256 * 1024 * 1024, m, &err);
			memmove(c->in.data, nl + 1, c->in.len - len - 1);
			c->in.len -= (int) (len + 1);
			c->in.data[c->in.len] = '\0';
			if (!ok)
			{
				helper_failed(c, run, psprintf("it sent a malformed line (%s)", err.message));
				return false;
			}
			if (m->type == ICEBERG_MSG_PROGRESS)
			{
				iceberg_compact_message_free(m);
				continue;
			}
			return true;
		}
		if (c->in.len > ICEBERG_COMPACT_MAX_LINE)
		{
			helper_failed(c, run, "it sent a line longer than the protocol allows");
			return false;
		}
		enlargeStringInfo(&c->in, 65536);
		{
			ssize_t		n = read(c->from, c->in.data + c->in.len, c->in.maxlen - c->in.len - 1);

			if (n > 0)
			{
				c->in.len += (int) n;
				c->in.data[c->in.len] = '\0';
				c->last_heard = GetCurrentTimestamp();
				continue;
			}
			if (n == 0)
			{
				(void) reap(c, 2000);
				helper_failed(c, run, "its output ended");
				return false;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			{
				helper_failed(c, run, psprintf("cannot read its output: %m"));
				return false;
			}
		}
		if (!wait_fd(c, run, c->from, false, deadline))
		{
			if (!c->exited)
				kill(c->pid, SIGKILL);
			return false;
		}
	}
}

int
compactor_groups(const Compactor *c)
{
	return c != NULL ? c->groups : 0;
}
