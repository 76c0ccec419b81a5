// drop_new_handshakes (handshake_gate.h): a classic BPF socket filter. On a TCP socket the kernel runs
// it with the packet starting at the TCP header, for the listener's SYNs and for the ACKs that complete
// its half-open connections alike, so it must pass everything but a bare SYN.
#include "coordinator/handshake_gate.h"

#ifdef __linux__
#include <linux/filter.h>
#include <sys/socket.h>

#include <array>
#endif

namespace tandem::coordinator {

bool drop_new_handshakes(int fd) {
#ifdef __linux__
  constexpr unsigned kFlagsOffset = 13;  // TCP header byte 13: CWR ECE URG ACK PSH RST SYN FIN
  constexpr unsigned kSyn = 0x02, kAck = 0x10;
  std::array<sock_filter, 5> code{{
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kFlagsOffset),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, kSyn | kAck),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kSyn, 0, 1),  // SYN without ACK: a new handshake
      BPF_STMT(BPF_RET | BPF_K, 0),                      // drop it
      BPF_STMT(BPF_RET | BPF_K, 0xFFFFFFFFu),            // keep the whole packet
  }};
  sock_fprog program{static_cast<unsigned short>(code.size()), code.data()};
  return ::setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program) == 0;
#else
  (void)fd;
  return false;
#endif
}

}  // namespace tandem::coordinator
