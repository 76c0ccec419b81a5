// make_data_link (data_link.h): the NCCL link where both ends are CUDA ranks and NCCL is built in
// (TANDEM_HAVE_NCCL), the host link otherwise.
#include "engine/comm/data_link.h"

#include <string_view>

#if TANDEM_HAVE_NCCL
#include "engine/comm/nccl_link.h"
#endif

namespace tandem::comm {

const char* data_link_kind(const LinkEnd& self, const LinkEnd& peer) {
#if TANDEM_HAVE_NCCL
  if (self.cuda && peer.cuda) return "nccl";
#else
  (void)self;
  (void)peer;
#endif
  return "mpi";
}

Result<std::unique_ptr<Link>> make_data_link(std::unique_ptr<HostPipe> pipe, int rank, const LinkEnd& self,
                                             const LinkEnd& peer, std::chrono::milliseconds init_timeout) {
#if TANDEM_HAVE_NCCL
  if (std::string_view(data_link_kind(self, peer)) == "nccl") {
    NcclLinkOptions options;
    options.rank = rank;
    options.device = self.device;
    options.init_timeout = init_timeout;
    TANDEM_ASSIGN(std::unique_ptr<NcclLink> link, make_nccl_link(std::move(pipe), options));
    return std::unique_ptr<Link>(std::move(link));
  }
#else
  (void)rank;
  (void)self;
  (void)peer;
  (void)init_timeout;
#endif
  return make_host_link(std::move(pipe));
}

}  // namespace tandem::comm
