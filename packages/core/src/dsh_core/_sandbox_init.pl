# The supervisor a sandboxed `bash` command runs under, inside bubblewrap: the same protocol
# as _sandbox_init.py (read its docstring), in perl because perl starts in ~2 ms where Python
# takes 15-30 ms, and a command pays it every time. Used wherever perl exists (Debian and
# Ubuntu always have it: perl-base is essential); the Python one otherwise.
#
#   perl _sandbox_init.pl STATUS_FD CONTROL_FD UNSET -- argv...
#
# Starts argv as the leader of its own process group; each byte read from CONTROL_FD is a
# signal number sent to that group, end of file there kills the group; when the command ends
# its raw wait status (decimal, one line) goes to STATUS_FD. UNSET names an environment
# variable the host added for this process only (PERL_BADLANG, which keeps perl quiet about a
# locale the system lacks) and the command must not see; empty when none.
#
# No module is loaded (each would cost a file read at every start): numbers stand for the
# constants (WNOHANG 1, EINTR 4, SIGKILL 9 on Linux).

my ($status_fd, $control_fd, $unset) = splice(@ARGV, 0, 3);
shift @ARGV;    # "--"
delete $ENV{$unset} if $unset ne '';
open(my $status, '>&=', $status_fd) or die "dsh sandbox: status fd $status_fd: $!\n";
open(my $control, '<&=', $control_fd) or die "dsh sandbox: control fd $control_fd: $!\n";
pipe(my $wake_read, my $wake_write) or die "dsh sandbox: pipe: $!\n";
# A child's end wakes the select below; written from the handler, so an exit that comes
# before the select starts is not missed.
$SIG{CHLD} = sub { syswrite($wake_write, 'x') };

my $pid = fork();
die "dsh sandbox: fork: $!\n" unless defined $pid;
if ($pid == 0) {
    $SIG{CHLD} = 'DEFAULT';
    close($_) for ($status, $control, $wake_read, $wake_write);
    setpgrp(0, 0);
    { exec { $ARGV[0] } @ARGV }
    syswrite(STDERR, "dsh sandbox: cannot run $ARGV[0]: $!\n");
    exit 127;
}

my $watch = '';
vec($watch, fileno($wake_read), 1) = 1;
vec($watch, fileno($control), 1) = 1;
while (1) {
    my $ready = $watch;
    if (select($ready, undef, undef, undef) < 0) {
        next if $! == 4;    # EINTR: the handler ran, the wake pipe says why
        die "dsh sandbox: select: $!\n";
    }
    if (vec($ready, fileno($wake_read), 1)) {
        sysread($wake_read, my $drained, 64);
        last if waitpid($pid, 1) == $pid;    # $? holds its raw wait status
    }
    if (vec($ready, fileno($control), 1)) {
        my $read = sysread($control, my $numbers, 64);
        if (!$read) {    # the host went away: nothing of the command may stay
            vec($watch, fileno($control), 1) = 0;
            $numbers = chr(9);
        }
        kill(-$_, $pid) for unpack('C*', $numbers);    # negative: the whole group
    }
}
syswrite($status, "$?\n");
exit 0;
