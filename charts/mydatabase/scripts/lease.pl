#!/usr/bin/perl
# The primary lease (docs/high-availability.md "A primary that fences itself"), run by probe.pl in the
# probe container of every database pod.
#
# The operator names the primary in a Lease (LEASE_NAME, its holderIdentity) and the database's pods in
# its annotation myapp.example.com/members ("<pod>=<address>,..."). The pod that holds it renews it every LEASE_RENEW_SECONDS; the
# other pods read it as often. A holder that cannot confirm it holds the lease for LEASE_FENCE_SECONDS
# stops its server (a fast shutdown: every session ends, nothing new is taken), and its container starts
# the server again only once the lease is confirmed (entrypoint.sh waits for STATE_DIR/state). It
# confirms by renewing, or, when the API server does not answer it, by every other member vouching for it
# (probe.pl's GET /peer): each still follows it and either read the lease naming it a moment ago or cannot
# reach the API server either. An API server that restarts stops no primary; a primary cut off from the API
# server and its peers stops.
# The operator promotes another pod only after the lease stayed still for longer than
# LEASE_FENCE_SECONDS, or once this pod's server is seen stopped.
#
# What it writes for the others, in STATE_DIR:
#   state   held (the lease names this pod and was renewed), follower (it names another pod),
#           absent (no lease: the chart alone, nothing to fence), unconfirmed, fenced <why>, starting,
#           unsupported <why> (an image without HTTPS for perl: nothing is fenced)
#   api     ok or failed: how the last request to the API server went (probe.pl's /peer reads it)
#   holder  the pod the lease named at the last answer, read_at when that was (seconds since the epoch)
# Only modules of Debian's perl and IO::Socket::SSL (libio-socket-ssl-perl) for HTTPS.
use strict;
use warnings;
use HTTP::Tiny;
use JSON::PP;
use Time::HiRes qw(sleep clock_gettime CLOCK_MONOTONIC);
use POSIX qw(strftime);
use POSIX ();

my $POD = $ENV{POD_NAME} or die "lease: POD_NAME is required\n";
my $LEASE = $ENV{LEASE_NAME} or die "lease: LEASE_NAME is required\n";
my $RENEW = $ENV{LEASE_RENEW_SECONDS} || 2;
my $FENCE = $ENV{LEASE_FENCE_SECONDS} || 6;
my $STATE_DIR = $ENV{LEASE_STATE_DIR} || '/var/run/mydb-lease';
my $ACCOUNT = $ENV{SERVICE_ACCOUNT_DIR} || '/var/run/secrets/kubernetes.io/serviceaccount';
my $LOCK = ($ENV{SOCKET_DIR} || '/var/run/postgresql') . '/.s.PGSQL.' . ($ENV{PGPORT} || 5432) . '.lock';
my $PEER_DOMAIN = $ENV{PEER_DOMAIN} || '';
my $DATA = $ENV{PGDATA} || '/var/lib/postgresql/data/pgdata';
my $PROBE_PORT = $ENV{PROBE_PORT} || 8008;
my $API_SECONDS = 1;      # one request to the API server
my $PEER_SECONDS = 0.5;   # one question to a peer
my $PEERS_SECONDS = 1.5;  # all of them
my $TICK = 0.5;
my $QUIT_SECONDS = 3;

sub now { clock_gettime(CLOCK_MONOTONIC) }

sub say_line { printf STDERR "lease: %s %s\n", strftime('%H:%M:%S', gmtime), $_[0] }

sub write_file {
    my ($name, $text) = @_;
    my $path = "$STATE_DIR/$name";
    open(my $out, '>', "$path.new") or return say_line("cannot write $path: $!");
    print {$out} "$text\n";
    close $out;
    rename "$path.new", $path;
}

my %written;
sub state_is {
    my ($name, $text) = @_;
    return if ($written{$name} // '') eq $text;
    write_file($name, $text);
    say_line("$name: $text") if $name eq 'state';
    $written{$name} = $text;
}

my $API_CLIENT;

sub api {
    my ($method, $body) = @_;
    my ($token, $namespace) = map { slurp("$ACCOUNT/$_") } qw(token namespace);
    return {status => 599, content => "no service account token in $ACCOUNT"} unless $token && $namespace;
    my $host = $ENV{KUBERNETES_SERVICE_HOST} // '';
    $host = "[$host]" if $host =~ /:/;
    my $url = "https://$host:" . ($ENV{KUBERNETES_SERVICE_PORT} || 443)
        . "/apis/coordination.k8s.io/v1/namespaces/$namespace/leases/$LEASE";
    # One client for the process: its connection is kept between requests (a TLS handshake each 2 s would
    # be most of this script's CPU, and the API server's for it).
    $API_CLIENT //= HTTP::Tiny->new(timeout => $API_SECONDS, verify_SSL => 1, keep_alive => 1,
                                    SSL_options => {SSL_ca_file => "$ACCOUNT/ca.crt"});
    my $http = $API_CLIENT;
    my %headers = (Authorization => "Bearer $token", Accept => 'application/json');
    my %options = (headers => \%headers);
    if (defined $body) {
        $headers{'Content-Type'} = 'application/merge-patch+json';
        $options{content} = encode_json($body);
    }
    return $http->request($method, $url, \%options);
}

sub slurp {
    open(my $in, '<', $_[0]) or return undef;
    local $/;
    my $text = <$in>;
    $text =~ s/\s+\z// if defined $text;
    return $text;
}

# The lease as the API server has it: ('held' | 'other' | 'absent' | 'failed', {holder, members} or an error).
# Its three fields are read by pattern, not by a JSON parser: they hold names and addresses only, and JSON::PP
# decoding the whole object every 2 s was most of this script's CPU. The renewal is a merge patch over the
# resourceVersion read (a precondition: a Lease changed since is refused, 409).
sub renew {
    my $got = api('GET');
    return ('absent', undef) if $got->{status} == 404;
    return ('failed', "$got->{status} $got->{content}") unless $got->{success};
    my $text = $got->{content} // '';
    my ($version) = $text =~ /"resourceVersion"\s*:\s*"(\d+)"/;
    return ('failed', 'no resourceVersion in the answer') unless defined $version;
    my ($holder) = $text =~ /"holderIdentity"\s*:\s*"([^"\\]*)"/;
    my ($members) = $text =~ /"myapp\.example\.com\/members"\s*:\s*"([^"\\]*)"/;
    my $lease = {holder => $holder // '', members => $members // ''};
    return ('other', $lease) if $lease->{holder} ne $POD;
    my $patch = {metadata => {resourceVersion => $version},
                 spec => {renewTime => strftime('%Y-%m-%dT%H:%M:%S.000000Z', gmtime)}};
    my $renewed = api('PATCH', $patch);
    return ('held', $lease) if $renewed->{success};
    return ('failed', "renewal refused: $renewed->{status} $renewed->{content}");
}

# Every other member vouches for this pod (probe.pl's GET /peer): it still follows it, and it either read the
# lease naming it AGE seconds ago, or cannot reach the API server either (AGE 0). The oldest AGE, or undef when
# one of them does not vouch. Asked from a child process given PEERS_SECONDS in all: a name lookup has no
# timeout of its own, and a signal cannot cut it short (a resolver cut off waits 5 s a try, and more).
sub peers_vouch {
    my (@members) = grep { (split /=/)[0] ne $POD } @_;
    return undef unless @members && $PEER_DOMAIN;
    pipe(my $reader, my $writer) or return undef;
    my $pid = fork();
    return undef unless defined $pid;
    if ($pid == 0) {
        close $reader;
        my $http = HTTP::Tiny->new(timeout => $PEER_SECONDS);
        my $age = 0;
        for my $member (@members) {
            my ($name, $address) = split /=/, $member, 2;
            my $host = $address ? ($address =~ /:/ ? "[$address]" : $address) : "$name.$PEER_DOMAIN";
            my $answer = $http->get("http://$host:$PROBE_PORT/peer?primary=$POD");
            my ($said) = ($answer->{content} // '') =~ /^age=([0-9.]+)/;
            POSIX::_exit(1) unless $answer->{success} && defined $said;
            $age = $said if $said > $age;
        }
        print {$writer} "$age\n";
        close $writer;
        POSIX::_exit(0);
    }
    close $writer;
    my $bits = '';
    vec($bits, fileno($reader), 1) = 1;
    my $line = select(my $ready = $bits, undef, undef, $PEERS_SECONDS) > 0 ? <$reader> : undef;
    close $reader;
    kill 'KILL', $pid;
    waitpid($pid, 0);
    return (defined $line && $line =~ /^([0-9.]+)$/) ? $1 : undef;
}

# A fast shutdown (SIGINT) ends every session and takes no new one at once; its walsenders then wait for
# replicas that a cut-off primary cannot reach, so an immediate one (SIGQUIT) follows after QUIT_SECONDS.
my ($signalled, $signalled_at, $quit) = (0, 0, 0);

# A standby takes no writes: one named and then not (a switchover aborted) goes on as it is.
sub takes_writes { return !-e "$DATA/standby.signal" }

sub stop_server {
    my ($why) = @_;
    return unless takes_writes();
    state_is('state', "fenced $why");
    my $pid = (split /\n/, slurp($LOCK) // '')[0];
    unless ($pid && $pid =~ /^\d+$/ && kill(0, $pid)) {
        $signalled = 0;
        return;
    }
    if ($signalled != $pid) {
        say_line("stopping the server (postmaster $pid, fast shutdown): $why");
        kill 'INT', $pid;
        ($signalled, $signalled_at, $quit) = ($pid, now(), 0);
    } elsif (!$quit && now() - $signalled_at >= $QUIT_SECONDS) {
        say_line("the server (postmaster $pid) still runs: immediate shutdown");
        kill 'QUIT', $pid;
        $quit = 1;
    }
}

sub run {
    mkdir $STATE_DIR;
    %written = ();
    state_is('state', 'starting');
    unless (HTTP::Tiny->can_ssl) {
        # An image without IO::Socket::SSL: no lease can be read, so none is kept (the server serves as
        # without the operator), and the log says so once.
        my (undef, $why) = HTTP::Tiny->can_ssl;
        state_is('state', "unsupported: no HTTPS in this image's perl (libio-socket-ssl-perl): $why");
        sleep 3600 while 1;
    }
    $SIG{$_} = sub { exit 0 } for qw(TERM INT QUIT);
    my ($holding, $confirmed, $next, $members, $down_since) = (0, now(), 0, '', undef);
    # The deadline as a timer too: a renewal and the peers' round can block this loop for 3 s and more (their
    # timeouts), and the server must stop at the deadline, not after them.
    $SIG{ALRM} = sub {
        stop_server(sprintf('the lease was not confirmed for %.1f s', now() - $confirmed))
            if $holding && now() - $confirmed >= $FENCE;
    };
    while (1) {
        if ($holding) {
            my $left = $confirmed + $FENCE - now();
            Time::HiRes::alarm($left > 0.01 ? $left : 0.01);
        } else {
            Time::HiRes::alarm(0);
        }
        my $start = now();
        if ($start >= $next) {
            $next = $start + $RENEW;
            my ($answer, $lease) = renew();
            state_is('api', $answer eq 'failed' ? 'failed' : 'ok');
            if ($answer eq 'failed') {
                $down_since //= $start;
                say_line("the API server did not confirm the lease: $lease") if $start - $down_since < $RENEW;
                my $age = $holding ? peers_vouch(split /,/, $members) : undef;
                if (defined $age && $start - $age > $confirmed) {
                    $confirmed = $start - $age;
                    state_is('state', 'held');
                } elsif ($holding && $written{state} eq 'held') {
                    state_is('state', 'unconfirmed');
                }
            } else {
                $down_since = undef;
                my $holder = $lease ? $lease->{holder} : '';
                $members = $lease ? $lease->{members} : '';
                state_is('holder', $holder);
                write_file('read_at', Time::HiRes::time());
                if ($answer eq 'held') {
                    ($holding, $confirmed) = (1, $start);
                    state_is('state', 'held');
                } elsif ($answer eq 'absent') {
                    $holding = 0;
                    state_is('state', 'absent');
                } else {
                    stop_server("the lease names $holder") if $holding;
                    $holding = 0;
                    state_is('state', 'follower');
                }
            }
        }
        if ($holding && now() - $confirmed >= $FENCE) {
            # Again on every tick: a server that starts anyway (by hand) stops too.
            stop_server(sprintf('the lease was not confirmed for %.1f s', now() - $confirmed));
        }
        my $left = $TICK - (now() - $start);
        sleep($left) if $left > 0;
    }
}

run();
