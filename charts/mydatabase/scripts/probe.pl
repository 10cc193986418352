#!/usr/bin/perl
# The database pod's probes as HTTP, for the kubelet's httpGet: an exec probe
# (pg_isready every second) cost the node about 30 ms of CPU each (the runtime's
# exec, the shim, pg_isready's start), a GET about 1 (docs/real-node.md).
#
#   probe.pl serve   answer GET /ready (200: the server accepts connections) and
#                    GET /alive (200: it answers at all; a crash recovery rejects)
#                    on PROBE_PORT, else 503
#                    and, with LEASE_NAME set, GET /peer?primary=POD (lease.pl's question to the
#                    other members; lease.pl itself runs as this process's child)
#   probe.pl ask     ask once; exit 0 accepting, 1 rejecting, 2 no answer (pg_isready's codes)
#
# Each answer asks the server afresh over its unix socket, as pg_isready does:
# a new connection's first reply tells. An authentication request: it accepts
# (the probe then hangs up, which the server does not log). SQLSTATE 57P03
# (starting, stopping, recovering): it rejects. Nothing within the time: no
# answer (a hung server still takes connections into its backlog). Only perl-base
# modules: every Debian-based PostgreSQL image has them.
use strict;
use warnings;
use IO::Socket::IP;
use IO::Socket::UNIX;
use Socket qw(SOCK_STREAM pack_sockaddr_un);
use POSIX ();
use Time::HiRes ();

my $SOCKET = ($ENV{SOCKET_DIR} || '/var/run/postgresql') . '/.s.PGSQL.' . ($ENV{PGPORT} || 5432);
my $ANSWER_SECONDS = 0.8;    # under the probes' 1-second timeout
my %STATE = (0 => 'accepting', 1 => 'rejecting', 2 => 'no answer');

# 0 accepting, 1 rejecting, 2 no answer.
sub ask_server {
    my $server = IO::Socket::UNIX->new(Type => SOCK_STREAM) or return 2;
    $server->blocking(0);    # a unix socket whose backlog is full refuses at once (EAGAIN)
    $server->connect(pack_sockaddr_un($SOCKET)) or return 2;
    my $params = join('', map {"$_\0"} user => 'postgres', database => 'postgres',
                      application_name => 'mydb-probe') . "\0";
    syswrite($server, pack('NN', 8 + length $params, 196608) . $params) or return 2;    # protocol 3.0
    my $reply = read_reply($server);
    return 2 unless defined $reply;
    return 0 if substr($reply, 0, 1) ne 'E';    # 'R': an authentication request
    my %fields = substr($reply, 5) =~ /(.)([^\0]*)\0/gs;
    return ($fields{C} // '') eq '57P03' ? 1 : 0;    # any other error: the server answered
}

# The server's first message (type, length, body), or undef when none comes in time.
sub read_reply {
    my ($server) = @_;
    my ($reply, $left) = ('', $ANSWER_SECONDS);
    while ($left > 0) {
        my $bits = '';
        vec($bits, fileno($server), 1) = 1;
        (my $found, $left) = select(my $readable = $bits, undef, undef, $left);
        return undef unless $found > 0;
        my $read = sysread($server, $reply, 8192, length $reply);
        return undef unless $read;    # closed, or an error
        next if length $reply < 5;
        my $length = unpack('N', substr($reply, 1, 4));
        return $reply if substr($reply, 0, 1) ne 'E' || length $reply >= 1 + $length;
    }
    return undef;
}

sub respond {
    my ($client, $status, $body) = @_;
    my $reason = {200 => 'OK', 404 => 'Not Found', 409 => 'Conflict', 503 => 'Service Unavailable'}->{$status};
    print {$client} "HTTP/1.1 $status $reason\r\nContent-Type: text/plain\r\n"
        . 'Content-Length: ' . length($body) . "\r\nConnection: close\r\n\r\n$body";
}

# GET /peer?primary=POD, lease.pl's question when POD cannot renew the lease: 200 "age=SECONDS" when this pod
# is a standby whose WAL receiver is pointed at POD and it read the lease naming POD SECONDS ago, or cannot
# reach the API server either (age=0); 409 otherwise, and POD stops once its lease runs out. The operator
# names a new primary in the lease before it promotes one, and points every replica it reaches away from
# the old primary: none of them vouches for it after that.
sub peer_answer {
    my ($primary) = @_;
    my $state_dir = $ENV{LEASE_STATE_DIR} || '/var/run/mydb-lease';
    my $data = $ENV{PGDATA} || '/var/lib/postgresql/data';
    my $holder = first_line("$state_dir/holder") // '';
    return (409, "this pod holds the lease\n") if $holder eq $ENV{POD_NAME};
    return (409, "this pod's server is no standby\n") unless -e "$data/standby.signal";
    my ($conninfo) = (join('', lines("$data/postgresql.auto.conf")) =~ /^primary_conninfo\s*=\s*'(.*)'\s*$/m);
    my ($host) = ($conninfo // '') =~ /(?:^|\s)host=(\S+)/;
    return (409, "this pod follows " . ($host // 'nobody') . "\n") unless ($host // '') =~ /^\Q$primary\E(\.|$)/;
    return (200, "age=0\n") if (first_line("$state_dir/api") // 'ok') eq 'failed';
    return (409, "the lease names " . ($holder || 'nobody') . "\n") if $holder ne $primary;
    my $read_at = first_line("$state_dir/read_at") // 0;
    return (200, sprintf("age=%.3f\n", Time::HiRes::time() - $read_at));
}

sub lines {
    open(my $in, '<', $_[0]) or return ();
    return <$in>;
}

sub first_line {
    my ($line) = lines($_[0]);
    chomp $line if defined $line;
    return $line;
}

# lease.pl as a child: when it ends, so does this container (the kubelet starts both again).
sub start_lease {
    return undef unless $ENV{LEASE_NAME};
    my $pid = fork() // die "probe: cannot start lease.pl: $!\n";
    if ($pid == 0) {
        exec('perl', ($ENV{SCRIPTS_DIR} || '/scripts') . '/lease.pl') or die "probe: cannot run lease.pl: $!\n";
    }
    return $pid;
}

sub serve {
    my $port = $ENV{PROBE_PORT} || 8008;
    # Both families where the pod has IPv6, else IPv4 alone.
    my $listener = IO::Socket::IP->new(LocalHost => '::', LocalPort => $port, Listen => 64, ReuseAddr => 1, V6Only => 0)
        || IO::Socket::IP->new(LocalHost => '0.0.0.0', LocalPort => $port, Listen => 64, ReuseAddr => 1)
        or die "probe: cannot listen on port $port: $@\n";
    # PID 1 of its container: a signal without a handler does nothing. The kubelet stops it with the
    # image's STOPSIGNAL: SIGINT for the postgres images.
    my $lease = start_lease();
    $SIG{$_} = sub { kill 'TERM', $lease if $lease; exit 0 } for qw(TERM INT QUIT);
    $SIG{PIPE} = 'IGNORE';
    $SIG{CHLD} = sub { die "probe: lease.pl ended\n" if $lease && waitpid($lease, POSIX::WNOHANG()) == $lease };
    while (1) {
        my $client = $listener->accept or next;
        my $request = '';
        my $bits = '';
        vec($bits, fileno($client), 1) = 1;
        while ($request !~ /\r?\n\r?\n/ && length $request < 4096
               && select(my $readable = $bits, undef, undef, 1) > 0) {
            sysread($client, $request, 4096, length $request) or last;
        }
        my ($path) = $request =~ m{^GET (/\S*)};
        if (defined $path && $path =~ m{^/peer\?primary=([a-z0-9.-]+)$} && $ENV{LEASE_NAME}) {
            respond($client, peer_answer($1));
        } elsif (!defined $path || ($path ne '/ready' && $path ne '/alive')) {
            respond($client, 404, "GET /ready or /alive\n");
        } else {
            my $state = ask_server();
            my $ok = $state == 0 || ($path eq '/alive' && $state == 1);
            respond($client, $ok ? 200 : 503, "$STATE{$state}\n");
        }
        close $client;
    }
}

my $mode = shift @ARGV // 'serve';
if ($mode eq 'ask') {
    my $state = ask_server();
    print "$SOCKET: $STATE{$state}\n";
    exit $state;
}
$mode eq 'serve' or die "usage: probe.pl [serve|ask]\n";
serve();
