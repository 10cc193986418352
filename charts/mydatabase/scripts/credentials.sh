# shellcheck shell=sh
# Sourced by the other scripts (not run on its own). Credentials come as files
# (the Secret mounted as a volume), never as environment variables: a value in
# the environment is inherited by every process the script starts, PostgreSQL
# included, and shows in the pod spec.
#
#   CREDENTIALS_DIR   holds username, password, replication-username and
#                     replication-password (the credentials Secret's keys)

# credential KEY: the content of CREDENTIALS_DIR/KEY; stops the script when it
# is missing or empty.
credential() {
  : "${CREDENTIALS_DIR:?CREDENTIALS_DIR is required}"
  if [ ! -s "$CREDENTIALS_DIR/$1" ]; then
    echo "credentials: $CREDENTIALS_DIR/$1 is missing or empty" >&2
    exit 1
  fi
  cat "$CREDENTIALS_DIR/$1"
}

# psql_quoted VALUE: VALUE for a single-quoted psql meta-command argument
# (\set name 'VALUE'): each \ doubled, each ' doubled.
psql_quoted() {
  printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/''/g"
}

# write_passfile FILE USER PASSWORD: a libpq password file (mode 0600, as libpq
# requires) that matches any host, port and database for USER. Give it
# variables, not "$(credential ...)": a failure inside an argument's command
# substitution would not stop the script.
write_passfile() {
  (
    umask 077
    printf '*:*:*:%s:%s\n' "$(pgpass_escape "$2")" "$(pgpass_escape "$3")" > "$1.new"
  )
  mv "$1.new" "$1"
}

# connect_as_superuser DIR: export PGUSER (the credentials' superuser) and
# PGPASSFILE (a password file written in DIR, which the caller removes), so
# libpq connects as the superuser without a password in the environment.
connect_as_superuser() {
  PGUSER="$(credential username)"
  superuser_password="$(credential password)"
  write_passfile "$1/pgpass" "$PGUSER" "$superuser_password"
  export PGUSER PGPASSFILE="$1/pgpass"
}

# ':' and '\' are the password file's field syntax.
pgpass_escape() {
  printf '%s' "$1" | sed 's/[\\:]/\\&/g'
}

# wait_for_server HOST: until the server at HOST (PGPORT) accepts connections, at most
# SERVER_WAIT_SECONDS (default 60); then the caller's own connection says what is wrong, if anything. A
# pod just started may not be admitted yet by the NetworkPolicy (the engine adds its address to the
# policy's sets a moment after it starts), and a primary may be restarting.
wait_for_server() {
  deadline=$(( $(date +%s) + ${SERVER_WAIT_SECONDS:-60} ))
  until pg_isready -q -h "$1" -t 2 || [ "$(date +%s)" -ge "$deadline" ]; do
    sleep 1
  done
}
