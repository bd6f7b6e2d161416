# Sourced by test/run-tests.sh and scripts/demo.sh: the machine-wide lock
# that lets only one of them install tms into the system PostgreSQL
# directories (and test against it) at a time.
#
#   tms_install_lock      hold the lock from now until this shell exits
#                         (or tms_install_unlock); waits while another
#                         holds it
#   tms_install_unlock    release it and close every descriptor of the lock
#                         file, so that long-lived children started next (a
#                         demo server) do not keep it held
#
# A caller that already holds the lock, such as `flock
# /tmp/tms-install.lock make test` or run-tests.sh re-executing itself in a
# lone clone, passes its locked descriptor down: taking the lock again
# through that same descriptor succeeds at once instead of waiting forever.
# TMS_INSTALL_LOCK names another lock file.

TMS_INSTALL_LOCK=${TMS_INSTALL_LOCK:-/tmp/tms-install.lock}

# The numbers of our open descriptors that refer to the lock file.
tms_install_lock_fds() {
  local f
  for f in /proc/$$/fd/*; do
    [ "$(readlink "$f" 2>/dev/null)" = "$TMS_INSTALL_LOCK" ] && echo "${f##*/}"
  done
  return 0
}

tms_install_lock() {
  local fd
  for fd in $(tms_install_lock_fds); do
    if flock -n "$fd"; then
      return 0
    fi
  done
  exec {TMS_INSTALL_LOCK_FD}>>"$TMS_INSTALL_LOCK"
  if ! flock -n "$TMS_INSTALL_LOCK_FD"; then
    echo "waiting for $TMS_INSTALL_LOCK (another make test, make demo or make install is running)"
    flock "$TMS_INSTALL_LOCK_FD"
  fi
}

tms_install_unlock() {
  local fd
  for fd in $(tms_install_lock_fds); do
    # only our own descriptor unlocks; an inherited one stays locked by its
    # owner (flock(1)) until that ends, we just stop passing it on
    [ "$fd" = "${TMS_INSTALL_LOCK_FD:-}" ] && flock -u "$fd"
    eval "exec $fd>&-"
  done
  TMS_INSTALL_LOCK_FD=
}
