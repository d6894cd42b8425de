# The supervisor a sandboxed `bash` command runs under, inside bubblewrap: the same protocol
# as _sandbox_init.py (read its docstring), in perl because perl starts in ~2 ms where Python
# takes 15-30 ms, and a command pays it every time. Used wherever perl exists (Debian and
# Ubuntu always have it: perl-base is essential); the Python one otherwise.
#
#   perl _sandbox_init.pl STATUS_FD CONTROL_FD UNSET LIMITS -- argv...
#
# First sets LIMITS (`NR:RESOURCE=VALUE,...:CAP`: prlimit64's system call number, then each
# resource limit, soft and hard alike; _sandbox_limits.py) on itself, so the command and all
# it starts inherit them. CAP, when not 0, is a number of processes this process watches for
# (every 20 ms), killing them all past it: the host's root is exempt from RLIMIT_NPROC.
# With STATUS_FD `-` (no supervision) it then execs argv, or, watching, waits for it and exits
# as it did (128+N for signal N). Otherwise it starts
# argv as the leader of its own process group; each byte read from CONTROL_FD is a signal
# number sent to that group, end of file there kills the group; when the command ends its raw
# wait status (decimal, one line) goes to STATUS_FD. UNSET names an environment variable the
# host added for this process only (PERL_BADLANG, which keeps perl quiet about a locale the
# system lacks) and the command must not see; empty when none.
#
# No module is loaded (each would cost a file read at every start): numbers stand for the
# constants (WNOHANG 1, EINTR 4, SIGKILL 9 on Linux); perl has no setrlimit, so prlimit64 is
# called through `syscall` (pid 0: this process; `QQ`: struct rlimit64).

my ($status_fd, $control_fd, $unset, $limits) = splice(@ARGV, 0, 4);
shift @ARGV;    # "--"
delete $ENV{$unset} if $unset ne '';
my ($prlimit, $list, $cap) = split(/:/, $limits, 3);
$cap ||= 0;
for my $item (split(/,/, $list // '')) {
    my ($resource, $value) = split(/=/, $item);
    syscall(0 + $prlimit, 0, 0 + $resource, pack('QQ', $value, $value), 0) == 0
        or die "dsh sandbox: cannot set resource limit $resource to $value: $!\n";
}
my $plain = $status_fd eq '-';
if ($plain && !$cap) {
    { exec { $ARGV[0] } @ARGV }
    syswrite(STDERR, "dsh sandbox: cannot run $ARGV[0]: $!\n");
    exit 127;
}
my ($status, $control);
if (!$plain) {
    open($status, '>&=', $status_fd) or die "dsh sandbox: status fd $status_fd: $!\n";
    open($control, '<&=', $control_fd) or die "dsh sandbox: control fd $control_fd: $!\n";
}
pipe(my $wake_read, my $wake_write) or die "dsh sandbox: pipe: $!\n";
# A child's end wakes the select below; written from the handler, so an exit that comes
# before the select starts is not missed.
$SIG{CHLD} = sub { syswrite($wake_write, 'x') };

my $pid = fork();
die "dsh sandbox: fork: $!\n" unless defined $pid;
if ($pid == 0) {
    $SIG{CHLD} = 'DEFAULT';
    close($_) for grep { defined } ($status, $control, $wake_read, $wake_write);
    setpgrp(0, 0) unless $plain;
    { exec { $ARGV[0] } @ARGV }
    syswrite(STDERR, "dsh sandbox: cannot run $ARGV[0]: $!\n");
    exit 127;
}

# The processes of this PID namespace (the sandbox's own /proc), bubblewrap's and ours
# included.
sub processes {
    opendir(my $proc, '/proc') or return 0;
    my $count = grep { /^\d+$/ } readdir($proc);
    closedir($proc);
    return $count;
}

my $watch = '';
vec($watch, fileno($wake_read), 1) = 1;
vec($watch, fileno($control), 1) = 1 if $control;
my $stopped = 0;
while (1) {
    my $ready = $watch;
    # Never an endless wait: perl runs the SIGCHLD handler (which writes the wake pipe) only
    # between two of its own steps, so a child that ends just before the select starts would
    # wake nothing; the select comes back at least every 0.25 s and the child is polled.
    # CAP: RLIMIT_NPROC does not hold for the host's root, so the count is watched here.
    my $found = select($ready, undef, undef, $cap ? 0.02 : 0.25);
    if ($found < 0) {
        next if $! == 4;    # EINTR: the handler ran, the wake pipe says why
        die "dsh sandbox: select: $!\n";
    }
    if ($cap && !$stopped && processes() > $cap) {
        $stopped = 1;
        syswrite(STDERR, "dsh sandbox: more than $cap processes: the command is killed\n");
        kill(9, -1);    # every process of the namespace but its init and this one
    }
    sysread($wake_read, my $drained, 64) if $found > 0 && vec($ready, fileno($wake_read), 1);
    last if waitpid($pid, 1) == $pid;    # WNOHANG; $? holds its raw wait status
    next unless $found > 0;
    if ($control && vec($ready, fileno($control), 1)) {
        my $read = sysread($control, my $numbers, 64);
        if (!$read) {    # the host went away: nothing of the command may stay
            vec($watch, fileno($control), 1) = 0;
            $numbers = chr(9);
        }
        kill(-$_, $pid) for unpack('C*', $numbers);    # negative: the whole group
    }
}
exit(($? & 127) ? 128 + ($? & 127) : $? >> 8) if $plain;
syswrite($status, "$?\n");
exit 0;
