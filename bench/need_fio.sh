# Sourced by the bench scripts that set fio beside rackbench: installs fio
# from apt as root when it is missing, else says how and exits.
if ! command -v fio >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q fio >/dev/null
    else
        echo "fio is needed (apt-get install fio)" >&2
        exit 1
    fi
fi
