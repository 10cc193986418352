#!/usr/bin/perl
# The primary lease (docs/high-availability.md "A primary that fences itself"), run by probe.pl in the
# probe container of every database pod.
#
# The operator names the primary in a Lease (LEASE_NAME, its holderIdentity) and the database's pods in
# its annotation myapp.example.com/members. The pod that holds it renews it every LEASE_RENEW_SECONDS; the
# other pods read it as often. A holder that cannot confirm it holds the lease for LEASE_FENCE_SECONDS
# stops its server (a fast shutdown: every session ends, nothing new is taken), and its container starts
# the server again only once the lease is confirmed (entrypoint.sh waits for STATE_DIR/state). It
# confirms by renewing, or, when the API server does not answer, by every other member saying that it
# cannot reach the API server either and still follows this pod (probe.pl's GET /peer): an API server
# that restarts stops no primary, a primary cut off from the API server and its peers stops.
# The operator promotes another pod only after the lease stayed still for longer than
# LEASE_FENCE_SECONDS, or once this pod's server is seen stopped.
#
# What it writes for the others, in STATE_DIR:
#   state   held (the lease names this pod and was renewed), follower (it names another pod),
#           absent (no lease: the chart alone, nothing to fence), unconfirmed, fenced <why>, starting
#   api     ok or failed: how the last request to the API server went (probe.pl's /peer reads it)
#   holder  the pod the lease named at the last answer
# Only modules of Debian's perl and IO::Socket::SSL (libio-socket-ssl-perl) for HTTPS.
use strict;
use warnings;
use HTTP::Tiny;
use JSON::PP;
use Time::HiRes qw(sleep clock_gettime CLOCK_MONOTONIC);
use POSIX qw(strftime);

my $POD = $ENV{POD_NAME} or die "lease: POD_NAME is required\n";
my $LEASE = $ENV{LEASE_NAME} or die "lease: LEASE_NAME is required\n";
my $RENEW = $ENV{LEASE_RENEW_SECONDS} || 2;
my $FENCE = $ENV{LEASE_FENCE_SECONDS} || 6;
my $STATE_DIR = $ENV{LEASE_STATE_DIR} || '/var/run/mydb-lease';
my $ACCOUNT = $ENV{SERVICE_ACCOUNT_DIR} || '/var/run/secrets/kubernetes.io/serviceaccount';
my $LOCK = ($ENV{SOCKET_DIR} || '/var/run/postgresql') . '/.s.PGSQL.' . ($ENV{PGPORT} || 5432) . '.lock';
my $PEER_DOMAIN = $ENV{PEER_DOMAIN} || '';
my $PROBE_PORT = $ENV{PROBE_PORT} || 8008;
my $API_SECONDS = 1;      # one request to the API server
my $PEER_SECONDS = 0.5;   # one question to a peer
my $PEERS_SECONDS = 1.5;  # all of them
my $TICK = 0.5;

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

sub api {
    my ($method, $body) = @_;
    my ($token, $namespace) = map { slurp("$ACCOUNT/$_") } qw(token namespace);
    return {status => 599, content => "no service account token in $ACCOUNT"} unless $token && $namespace;
    my $host = $ENV{KUBERNETES_SERVICE_HOST} // '';
    $host = "[$host]" if $host =~ /:/;
    my $url = "https://$host:" . ($ENV{KUBERNETES_SERVICE_PORT} || 443)
        . "/apis/coordination.k8s.io/v1/namespaces/$namespace/leases/$LEASE";
    my $http = HTTP::Tiny->new(timeout => $API_SECONDS, verify_SSL => 1,
                               SSL_options => {SSL_ca_file => "$ACCOUNT/ca.crt"});
    my %headers = (Authorization => "Bearer $token", Accept => 'application/json');
    my %options = (headers => \%headers);
    if (defined $body) {
        $headers{'Content-Type'} = 'application/json';
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

# The lease as the API server has it: ('held' | 'other' | 'absent' | 'failed', lease object or error).
sub renew {
    my $got = api('GET');
    return ('absent', undef) if $got->{status} == 404;
    return ('failed', "$got->{status} $got->{content}") unless $got->{success};
    my $lease = eval { decode_json($got->{content}) } or return ('failed', 'not JSON');
    my $holder = $lease->{spec}{holderIdentity} // '';
    return ('other', $lease) if $holder ne $POD;
    $lease->{spec}{renewTime} = strftime('%Y-%m-%dT%H:%M:%S.000000Z', gmtime);
    my $put = api('PUT', $lease);
    return ('held', $lease) if $put->{success};
    return ('failed', "renewal refused: $put->{status} $put->{content}");
}

# Every other member answers that it cannot reach the API server either and still follows this pod. Within
# PEERS_SECONDS in all: a name lookup has no timeout of its own (a resolver cut off waits 5 s and more).
sub peers_confirm {
    my (@members) = @_;
    return 0 unless @members && $PEER_DOMAIN;
    my $http = HTTP::Tiny->new(timeout => $PEER_SECONDS);
    my $confirmed = eval {
        local $SIG{ALRM} = sub { die "timeout\n" };
        Time::HiRes::alarm($PEERS_SECONDS);
        for my $member (@members) {
            next if $member eq $POD;
            my $answer = $http->get("http://$member.$PEER_DOMAIN:$PROBE_PORT/peer?primary=$POD");
            die "no\n" unless $answer->{success};
        }
        1;
    };
    Time::HiRes::alarm(0);
    return $confirmed ? 1 : 0;
}

sub stop_server {
    my ($why) = @_;
    state_is('state', "fenced $why");
    my $pid = (split /\n/, slurp($LOCK) // '')[0];
    return unless $pid && $pid =~ /^\d+$/ && kill(0, $pid);
    # SIGINT: PostgreSQL's fast shutdown. Sessions end now; a commit not acknowledged yet is not.
    say_line("stopping the server (postmaster $pid): $why");
    kill 'INT', $pid;
}

sub run {
    mkdir $STATE_DIR;
    %written = ();
    state_is('state', 'starting');
    $SIG{$_} = sub { exit 0 } for qw(TERM INT QUIT);
    my ($holding, $confirmed, $next, $members, $down_since) = (0, now(), 0, '', undef);
    while (1) {
        my $start = now();
        if ($start >= $next) {
            $next = $start + $RENEW;
            my ($answer, $lease) = renew();
            state_is('api', $answer eq 'failed' ? 'failed' : 'ok');
            if ($answer eq 'failed') {
                $down_since //= $start;
                say_line("the API server did not confirm the lease: $lease") if $start - $down_since < $RENEW;
                if ($holding && peers_confirm(split /,/, $members)) {
                    $confirmed = $start;
                    state_is('state', 'held');
                } elsif ($holding && $written{state} eq 'held') {
                    state_is('state', 'unconfirmed');
                }
            } else {
                $down_since = undef;
                my $holder = $lease ? ($lease->{spec}{holderIdentity} // '') : '';
                $members = $lease ? ($lease->{metadata}{annotations}{'myapp.example.com/members'} // '') : '';
                state_is('holder', $holder);
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
