/*-------------------------------------------------------------------------
 *
 * tms_compactor.c
 *	  The compaction helper: a program a tms worker starts for one
 *	  compaction job and talks to through pipes (stdin: the worker's
 *	  lines; stdout: its answers; stderr: diagnostics the worker keeps for
 *	  last_error).  src/iceberg/compact/compact_wire.h is the protocol.
 *
 *	  tms_compactor <parent pid>
 *
 * Life: it dies with its parent (PR_SET_PDEATHSIG, and a parent pid that
 * is not the one it was given means the parent is already gone); reads
 * the hello (storage, the hosts it may connect to, memory limit, threads,
 * temporary directory), opens
 * an in-memory DuckDB database capped by them (spilling below the
 * temporary directory; with less than 48 MB a thread, fewer threads),
 * answers ready, then rewrites the group of each group line until its
 * input ends, then finishes the groups in flight.  Any failure is an
 * error line and exit status 1: the worker fails the job, never itself.
 * A heartbeat thread sends a progress line every half second for each
 * group running, so that a silent helper can be told from a busy one.
 *
 * Groups at once (max-concurrent-file-group-rewrites, Iceberg's
 * RewriteDataFiles: up to N groups rewritten at once): the hello asks for
 * m, the ready grants k = m (at most ICEBERG_COMPACT_MAX_GROUPS), and the
 * worker keeps at most k groups in flight; each runs in a thread of its
 * own, with a DuckDB connection of its own (its temporary tables are its
 * own) on the one database.  One database, not k helpers or k databases:
 * tms.compaction_memory_limit and tms.compaction_threads stay limits of
 * the whole job, and DuckDB's buffer manager shares the memory among the
 * groups' statements (each within its share; what does not fit spills),
 * so k does not multiply them.  Threads: the thread running a statement
 * works on it too, so DuckDB gets max(1, threads - k + 1) threads of its
 * own and at most `threads` statements run at once (a semaphore): never
 * more than `threads` busy on DuckDB's work, and a group waiting for its
 * turn downloads or uploads meanwhile.  Everything but DuckDB's
 * statements (storage, which is single-threaded by design; jansson, whose
 * allocator hooks are process-wide) runs under one lock, released only
 * while a statement runs (helper_run): the groups overlap their DuckDB
 * work with each other and with one group's transfers.  A light
 * statement (helper_run_light: a file's footer or schema, a table of a
 * few rows; milliseconds) waits for no turn: a group readies its next
 * rewrite, or measures the file it wrote, while others' rewrites hold
 * every turn, and starts its rewrite as soon as a turn is free (waiting,
 * those statements held up the group's rewrite by the length of another
 * group's).")  A group whose
 * rewrite fails (helper_rewrite_group removes its files and tables) is
 * an error line of that group "alone", and the others go on: the worker
 * decides (with partial progress the group is left out of its commit;
 * without, the run fails).  Any other failure ends the helper.
 *
 * Nothing here trusts its own input beyond the worker's word: the lines
 * are parsed by the protocol's decoders; output paths are the worker's
 * directory and prefix with a number.
 *
 * src/compactor/tms_compactor.c
 *
 *-------------------------------------------------------------------------
 */
#include "compactor/compactor_int.h"
#include "io/http/reach.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* the memory a DuckDB thread of the rewrite needs, about */
#define PER_THREAD_MEMORY ((int64_t) 48 * 1024 * 1024)

/* a group in flight: its thread, and what the heartbeat reports */
typedef struct Slot
{
	bool		busy;
	int			group;
	int64_t		done;			/* bytes of the group done so far */
	int			peak;			/* most groups running at once while it ran */
	IcebergCompactJob *job;
	pthread_t	thread;
} Slot;

/* out_lock: the output and the slots; slot_freed signals with it */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slot_freed = PTHREAD_COND_INITIALIZER;
static Slot slots[ICEBERG_COMPACT_MAX_GROUPS];
static int	nslots = 1;
static int	running;

/* everything but DuckDB's statements; taken before out_lock, never after */
static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;

/* DuckDB statements running at once, at most the threads */
static sem_t statements;

static Helper *shared;

/* Write all of buf to fd; exit when the worker is gone. */
static void
write_all(int fd, const char *buf, size_t len)
{
	while (len > 0)
	{
		ssize_t		n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(3);			/* the worker closed the pipe: it is gone */
		buf += n;
		len -= (size_t) n;
	}
}

/* groups that asked for preserve_insertion_order; under big_lock */
static int	order_holders;

/*
 * SET is global for this setting, not the connection's: it is set when the
 * first group asks and reset when the last gives it back, with big_lock
 * held (no statement of the group asking starts before it is on, and no
 * other group changes it meanwhile).  Other groups' statements run with it
 * on meanwhile, which costs them only some speed.
 */
bool
helper_insertion_order(Helper *h, bool keep, TmsError *err)
{
	const char *sql = NULL;
	duckdb_result r;
	bool		ok = true;

	if (keep && order_holders++ == 0)
		sql = "SET preserve_insertion_order = true";
	else if (!keep && --order_holders == 0)
		sql = "SET preserve_insertion_order = false";
	if (sql == NULL)
		return true;
	if (duckdb_query(h->con, sql, &r) != DuckDBSuccess)
	{
		const char *e = duckdb_result_error(&r);

		tms_error_set(err, ICEBERG_ERR_IO, "DuckDB failed");
		tms_error_detail(err, "%.1000s", e ? e : "unknown error");
		if (keep)
			order_holders--;
		ok = false;
	}
	duckdb_destroy_result(&r);
	return ok;
}

/* One line, no allocation (the heartbeat's). */
static void
send_text(const char *line)
{
	pthread_mutex_lock(&out_lock);
	write_all(STDOUT_FILENO, line, strlen(line));
	write_all(STDOUT_FILENO, "\n", 1);
	pthread_mutex_unlock(&out_lock);
}

void
helper_send(char *line)
{
	if (line == NULL)
	{
		static const char oom[] = "{\"type\":\"error\",\"message\":\"out of memory\"}\n";

		pthread_mutex_lock(&out_lock);
		write_all(STDOUT_FILENO, oom, sizeof(oom) - 1);
		pthread_mutex_unlock(&out_lock);
		_exit(1);
	}
	pthread_mutex_lock(&out_lock);
	write_all(STDOUT_FILENO, line, strlen(line));
	write_all(STDOUT_FILENO, "\n", 1);
	pthread_mutex_unlock(&out_lock);
	io_free(line);
}

void
helper_progress(int group, int64_t done)
{
	pthread_mutex_lock(&out_lock);
	for (int i = 0; i < nslots; i++)
		if (slots[i].busy && slots[i].group == group)
			slots[i].done = done;
	pthread_mutex_unlock(&out_lock);
}

int
helper_in_flight(int group)
{
	int			peak = 1;

	pthread_mutex_lock(&out_lock);
	for (int i = 0; i < nslots; i++)
		if (slots[i].busy && slots[i].group == group)
			peak = slots[i].peak;
	pthread_mutex_unlock(&out_lock);
	return peak;
}

bool
helper_statement(Helper *h, const char *sql, duckdb_result *res)
{
	bool		ok;

	pthread_mutex_unlock(&big_lock);
	while (sem_wait(&statements) != 0)
		;						/* EINTR */
	ok = duckdb_query(h->con, sql, res) == DuckDBSuccess;
	sem_post(&statements);
	pthread_mutex_lock(&big_lock);
	return ok;
}

bool
helper_run_light(Helper *h, const char *sql, duckdb_result *res, TmsError *err)
{
	duckdb_result local;
	duckdb_result *r = res ? res : &local;
	bool		ok;

	/* no turn to wait for: milliseconds of work beside the statements */
	pthread_mutex_unlock(&big_lock);
	ok = duckdb_query(h->con, sql, r) == DuckDBSuccess;
	pthread_mutex_lock(&big_lock);
	return helper_result(ok, r, res, err);
}

int64_t
helper_peak_rss(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (int64_t) ru.ru_maxrss * 1024;
}

static void *
heartbeat(void *arg)
{
	(void) arg;
	for (;;)
	{
		struct timespec ts = {0, 500 * 1000 * 1000};
		int			g[ICEBERG_COMPACT_MAX_GROUPS];
		int64_t		done[ICEBERG_COMPACT_MAX_GROUPS];
		int			n = 0;

		nanosleep(&ts, NULL);
		pthread_mutex_lock(&out_lock);
		for (int i = 0; i < nslots; i++)
			if (slots[i].busy)
			{
				g[n] = slots[i].group;
				done[n++] = slots[i].done;
			}
		pthread_mutex_unlock(&out_lock);
		for (int i = 0; i < n; i++)
		{
			char		buf[ICEBERG_COMPACT_PROGRESS_LEN];

			iceberg_compact_progress_line(buf, sizeof(buf), g[i], done[i]);
			send_text(buf);
		}
	}
	return NULL;
}

static void
fail(int group, const char *msg)
{
	helper_send(iceberg_compact_error_json(group < 0 ? 0 : group, msg));
	_exit(1);					/* other groups' threads may be inside DuckDB */
}

/* One line of stdin (without its newline), or NULL at the end. */
static char *
read_line(size_t *len)
{
	static char *buf = NULL;
	static size_t cap = 0;
	ssize_t		n;

	errno = 0;
	n = getline(&buf, &cap, stdin);
	if (n < 0)
	{
		if (errno != 0)
			fail(-1, "cannot read from the worker");
		return NULL;
	}
	if ((size_t) n > ICEBERG_COMPACT_MAX_LINE)
		fail(-1, "a line from the worker is too long");
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	*len = (size_t) n;
	return buf;
}

/* A group's thread: its own connection, the big lock but in statements. */
static void *
group_thread(void *arg)
{
	Slot	   *s = arg;
	Helper		h = *shared;
	TmsError	err;
	char		msg[2048];

	pthread_mutex_lock(&big_lock);
	if (duckdb_connect(shared->db, &h.con) != DuckDBSuccess)
		fail(s->group, "cannot connect to DuckDB");
	/* a failed rewrite cleaned up after itself: the others go on */
	if (!helper_rewrite_group(&h, s->job, &err))
	{
		snprintf(msg, sizeof(msg), "%s%s%s", err.message,
				 err.detail[0] ? ": " : "", err.detail);
		helper_send(iceberg_compact_group_error_json(s->group, msg, true));
	}
	duckdb_disconnect(&h.con);
	iceberg_compact_job_free(s->job);
	pthread_mutex_unlock(&big_lock);

	pthread_mutex_lock(&out_lock);
	s->busy = false;
	s->job = NULL;
	running--;
	pthread_cond_broadcast(&slot_freed);
	pthread_mutex_unlock(&out_lock);
	return NULL;
}

/*
 * Run job in a free slot, once there is one (a group's done is sent
 * before its slot is freed, so the worker's next group may come first).
 */
static void
start_group(IcebergCompactJob *job)
{
	Slot	   *s = NULL;
	pthread_attr_t attr;

	pthread_mutex_lock(&out_lock);
	for (;;)
	{
		for (int i = 0; i < nslots && s == NULL; i++)
			if (!slots[i].busy)
				s = &slots[i];
		if (s != NULL)
			break;
		pthread_cond_wait(&slot_freed, &out_lock);
	}
	for (int i = 0; i < nslots; i++)
		if (slots[i].busy && slots[i].group == job->group)
		{
			pthread_mutex_unlock(&out_lock);
			fail(job->group, "a group already in flight was sent again");
		}
	running++;
	s->busy = true;
	s->group = job->group;
	s->done = 0;
	s->job = job;
	s->peak = 0;
	for (int i = 0; i < nslots; i++)
		if (slots[i].busy && slots[i].peak < running)
			slots[i].peak = running;
	pthread_mutex_unlock(&out_lock);
	if (pthread_attr_init(&attr) != 0 ||
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0 ||
		pthread_attr_setstacksize(&attr, (size_t) 8 * 1024 * 1024) != 0 ||
		pthread_create(&s->thread, &attr, group_thread, s) != 0)
		fail(job->group, "cannot start a thread for the group");
	pthread_attr_destroy(&attr);
}

/* Open DuckDB as the hello says. */
static void
open_duckdb(Helper *h)
{
	duckdb_config cfg;
	char	   *err = NULL;
	char		val[64];
	char		spill[4200];
	const char *version = duckdb_library_version();

	if (version == NULL || strncmp(version, "v1.", 3) != 0)
		fail(-1, "libduckdb is not of DuckDB 1.x");
	snprintf(spill, sizeof(spill), "%s/duckdb", h->temp_directory);
	if (duckdb_create_config(&cfg) != DuckDBSuccess)
		fail(-1, "cannot configure DuckDB");
	snprintf(val, sizeof(val), "%lldB", (long long) h->memory_limit);
	if (duckdb_set_config(cfg, "memory_limit", val) != DuckDBSuccess)
		fail(-1, "DuckDB refused memory_limit");

	/*
	 * Each thread of a COPY buffers the row groups it reads and writes: below
	 * about 48 MB a thread, fewer threads (at least one) keep the rewrite
	 * within the limit instead of failing it.
	 */
	if (h->threads > 1 && h->memory_limit / h->threads < PER_THREAD_MEMORY)
		h->threads = h->memory_limit / PER_THREAD_MEMORY > 1 ?
			(int) (h->memory_limit / PER_THREAD_MEMORY) : 1;
	/* its own threads: the statements' threads work too (the file header) */
	snprintf(val, sizeof(val), "%d", h->threads - nslots + 1 > 1 ? h->threads - nslots + 1 : 1);
	if (sem_init(&statements, 0, (unsigned) h->threads) != 0)
		fail(-1, "cannot create a semaphore");
	if (duckdb_set_config(cfg, "threads", val) != DuckDBSuccess ||
		duckdb_set_config(cfg, "temp_directory", spill) != DuckDBSuccess ||
		duckdb_set_config(cfg, "preserve_insertion_order", "false") != DuckDBSuccess ||
		duckdb_set_config(cfg, "autoinstall_known_extensions", "false") != DuckDBSuccess ||
		duckdb_set_config(cfg, "autoload_known_extensions", "false") != DuckDBSuccess)
		fail(-1, "DuckDB refused its configuration");
	if (duckdb_open_ext(NULL, &h->db, cfg, &err) != DuckDBSuccess)
	{
		char		msg[600];

		snprintf(msg, sizeof(msg), "cannot open DuckDB: %.500s", err ? err : "unknown error");
		fail(-1, msg);
	}
	duckdb_destroy_config(&cfg);
	if (duckdb_connect(h->db, &h->con) != DuckDBSuccess)
		fail(-1, "cannot connect to DuckDB");
}

int
main(int argc, char **argv)
{
	Helper		h;
	IcebergCompactHello hello;
	IoStorageConfig cfg;
	TmsError	err;
	TmsError	ioerr;
	pthread_t	hb;
	char	   *line;
	size_t		len;
	struct stat sb;

	/* die with the worker; a parent other than the one named is gone already */
	if (argc != 2)
	{
		fprintf(stderr, "usage: tms_compactor <parent pid>\n"
				"(started by a tms worker for a compaction job; it speaks the protocol of src/iceberg/compact/compact_wire.h on stdin and stdout)\n");
		return 2;
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != (pid_t) atol(argv[1]))
		return 3;
	signal(SIGPIPE, SIG_IGN);
	io_init();
	memset(&h, 0, sizeof(h));

	line = read_line(&len);
	if (line == NULL)
		return 0;
	if (!iceberg_compact_hello_parse(line, len, &hello, &err))
	{
		char		msg[600];

		snprintf(msg, sizeof(msg), "%s", err.message);
		fail(-1, msg);
	}
	memset(line, 0, len);		/* the credentials */
	if (stat(hello.temp_directory, &sb) != 0 || !S_ISDIR(sb.st_mode))
		fail(-1, "the temporary directory does not exist");
	h.temp_directory = hello.temp_directory;
	h.memory_limit = hello.memory_limit;
	h.threads = hello.threads;
	/* the hosts the worker may reach, the helper may reach (io/http/reach.h) */
	{
		IoReachRules *rules;
		char		why[300];
		char		msg[400];

		if (io_reach_parse(hello.allowed_hosts, &rules, why, sizeof(why)) != 0)
		{
			snprintf(msg, sizeof(msg), "tms.allowed_hosts: %s", why);
			fail(-1, msg);
		}
		io_reach_set_rules(rules);
	}
	iceberg_compact_hello_storage(&hello, &cfg);
	h.storage = io_storage_create(&cfg, &ioerr);
	if (h.storage == NULL)
		fail(-1, ioerr.message);
	nslots = hello.groups < ICEBERG_COMPACT_MAX_GROUPS ? hello.groups : ICEBERG_COMPACT_MAX_GROUPS;
	if (nslots < 1)
		nslots = 1;
	open_duckdb(&h);
	shared = &h;
	if (pthread_create(&hb, NULL, heartbeat, NULL) != 0)
		fail(-1, "cannot start the heartbeat thread");
	helper_send(iceberg_compact_ready_json(duckdb_library_version(), nslots));

	while ((line = read_line(&len)) != NULL)
	{
		IcebergCompactJob *job;
		char		msg[2048];

		pthread_mutex_lock(&big_lock);
		if (!iceberg_compact_job_parse(line, len, &job, &err))
		{
			snprintf(msg, sizeof(msg), "%s", err.message);
			fail(-1, msg);
		}
		pthread_mutex_unlock(&big_lock);
		start_group(job);
	}
	/* the input ended: the groups in flight finish */
	pthread_mutex_lock(&out_lock);
	while (running > 0)
		pthread_cond_wait(&slot_freed, &out_lock);
	pthread_mutex_unlock(&out_lock);
	duckdb_disconnect(&h.con);
	duckdb_close(&h.db);
	io_storage_free(h.storage);
	iceberg_compact_hello_free(&hello);
	return 0;
}
