// Closing a listening socket resets every connection in its backlog: a client whose connect() had
// completed (the kernel finished the handshake) and who sent its request finds it reset, unanswered.
// An orderly stop therefore closes the gate first: the listener drops new SYNs (a client retries its
// SYN after ~1 s and meets the closed port: refused), handshakes already under way complete, the
// server accepts them, and only then closes the listener with an empty backlog.
#pragma once

namespace tandem::coordinator {

// Makes the listening TCP socket `fd` drop every new SYN from now on, leaving the handshakes already
// begun to complete. False where the platform has no socket filters (the backlog race stays open).
bool drop_new_handshakes(int fd);

}  // namespace tandem::coordinator
