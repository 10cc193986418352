# shellcheck shell=sh
# Sourced by the scripts that list backups (not run on its own): the one
# spelling of a backup's stamp, a UTC time as YYYYMMDDTHHMMSSZ (base-backup.sh
# and backup.sh name their output with it; it sorts in time order).

# stamps DIR [SUFFIX]: the entries of DIR named <stamp>SUFFIX, oldest first,
# one a line; nothing when there is none or no DIR. A hidden .<stamp>.partial
# (a run in progress, or one that was killed) never matches.
stamps() {
  for stamps_entry in "$1"/[0-9]*"${2:-}"; do
    stamps_name="${stamps_entry##*/}"
    case "${stamps_name%"${2:-}"}" in
      [0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]T[0-9][0-9][0-9][0-9][0-9][0-9]Z) printf '%s\n' "$stamps_name" ;;
    esac
  done
}
