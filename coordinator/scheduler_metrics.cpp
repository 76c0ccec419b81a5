// render_scheduler_metrics (scheduler_metrics.h): counters are totals since start, gauges the last
// round's figures.
#include "coordinator/scheduler_metrics.h"

#include <fmt/format.h>

namespace tandem::coordinator {
namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string render_scheduler_metrics(const RoundScheduler& scheduler) {
  const auto targets = scheduler.targets();
  const auto drafters = scheduler.drafters();
  std::string out;
  header(out, "tandem_gen_queue_requests", "gauge", "Generation requests waiting for a KV slot.");
  out += fmt::format("tandem_gen_queue_requests {}\n", scheduler.queued());
  header(out, "tandem_gen_rounds_total", "counter", "Rounds a target rank ran.");
  for (const auto& t : targets) out += fmt::format("tandem_gen_rounds_total{{rank=\"{}\"}} {}\n", t.rank, t.rounds);
  header(out, "tandem_gen_round_seconds_total", "counter",
         "Round time by phase: prefill, wait (for drafts: drafting and transfers), draft (the drafters' own "
         "settle and draft), send (tap rows to drafter ranks), verify.");
  for (const auto& t : targets) {
    const std::pair<const char*, uint64_t> phases[] = {
        {"prefill", t.prefill_us}, {"wait", t.wait_us}, {"draft", t.drafter_us}, {"send", t.send_us},
        {"verify", t.verify_us}};
    for (const auto& [phase, us] : phases) {
      out += fmt::format("tandem_gen_round_seconds_total{{rank=\"{}\",phase=\"{}\"}} {:.6f}\n", t.rank, phase,
                         double(us) / 1e6);
    }
  }
  header(out, "tandem_gen_tokens_total", "counter", "Tokens committed by a target rank.");
  for (const auto& t : targets) out += fmt::format("tandem_gen_tokens_total{{rank=\"{}\"}} {}\n", t.rank, t.tokens);
  header(out, "tandem_gen_drafted_total", "counter", "Draft tokens verified by a target rank.");
  for (const auto& t : targets) out += fmt::format("tandem_gen_drafted_total{{rank=\"{}\"}} {}\n", t.rank, t.drafted);
  header(out, "tandem_gen_accepted_total", "counter", "Draft tokens a target rank accepted.");
  for (const auto& t : targets) {
    out += fmt::format("tandem_gen_accepted_total{{rank=\"{}\"}} {}\n", t.rank, t.accepted);
  }
  header(out, "tandem_gen_guesses_total", "counter",
         "Overlap: next-round guesses a target rank's drafters made while it verified.");
  for (const auto& t : targets) out += fmt::format("tandem_gen_guesses_total{{rank=\"{}\"}} {}\n", t.rank, t.guesses);
  header(out, "tandem_gen_guesses_used_total", "counter",
         "Overlap: guesses whose outcome came true, verified without waiting for a draft.");
  for (const auto& t : targets) {
    out += fmt::format("tandem_gen_guesses_used_total{{rank=\"{}\"}} {}\n", t.rank, t.guesses_used);
  }
  header(out, "tandem_gen_drafter_moves_total", "counter",
         "Requests of a dead drafter whose context a target rank rebuilt on another drafter.");
  for (const auto& t : targets) out += fmt::format("tandem_gen_drafter_moves_total{{rank=\"{}\"}} {}\n", t.rank, t.moves);
  header(out, "tandem_gen_drafter_drain_moves_total", "counter",
         "Requests of a drained drafter that a target rank moved to another drafter (or to plain decoding).");
  for (const auto& t : targets) {
    out += fmt::format("tandem_gen_drafter_drain_moves_total{{rank=\"{}\"}} {}\n", t.rank, t.drain_moves);
  }
  header(out, "tandem_gen_drafter_handoffs_total", "counter",
         "Drafter contexts a target rank handed from a drained drafter to another as they were (nothing "
         "recomputed).");
  for (const auto& t : targets) {
    out += fmt::format("tandem_gen_drafter_handoffs_total{{rank=\"{}\"}} {}\n", t.rank, t.handoffs);
  }
  header(out, "tandem_gen_data_plane_bytes_total", "counter", "Bytes a target rank moved to and from its drafters.");
  for (const auto& t : targets) {
    out += fmt::format("tandem_gen_data_plane_bytes_total{{rank=\"{}\"}} {}\n", t.rank, t.bytes_moved);
  }
  header(out, "tandem_gen_device_to_host_bytes_total", "counter",
         "Bytes a target rank's rounds copied from its GPU to the host (0 on the CPU backend). A generator keeps "
         "logits and tap rows on the GPU: token ids only.");
  for (const auto& t : targets) {
    out += fmt::format("tandem_gen_device_to_host_bytes_total{{rank=\"{}\"}} {}\n", t.rank, t.device_to_host_bytes);
  }
  header(out, "tandem_gen_drafter_device_to_host_bytes_total", "counter",
         "Bytes the drafter ranks of a target rank copied from their GPUs to the host (0 on the CPU backend): tap "
         "rows settle from the data plane's device buffer, so this is what overlap's guesses and drains fetch.");
  for (const auto& t : targets) {
    out += fmt::format("tandem_gen_drafter_device_to_host_bytes_total{{rank=\"{}\"}} {}\n", t.rank,
                       t.drafter_device_to_host_bytes);
  }
  header(out, "tandem_gen_kv_slots", "gauge", "KV cache slots of a target rank.");
  for (const auto& t : targets) out += fmt::format("tandem_gen_kv_slots{{rank=\"{}\"}} {}\n", t.rank, t.slots);
  header(out, "tandem_gen_kv_slots_used", "gauge", "KV cache slots holding a request, as the target rank reported.");
  for (const auto& t : targets) {
    out += fmt::format("tandem_gen_kv_slots_used{{rank=\"{}\"}} {}\n", t.rank, t.rank_slots_used);
  }
  header(out, "tandem_gen_draft_block", "gauge", "Block size of a target rank's last round (below 2: plain decoding).");
  for (const auto& t : targets) out += fmt::format("tandem_gen_draft_block{{rank=\"{}\"}} {}\n", t.rank, t.last_block);
  header(out, "tandem_gen_drafter_slots_used", "gauge", "Drafter context slots holding a request.");
  for (const auto& d : drafters) {
    out += fmt::format("tandem_gen_drafter_slots_used{{rank=\"{}\",target=\"{}\"}} {}\n", d.rank, d.target,
                       d.slots_used);
  }
  header(out, "tandem_gen_drafter_up", "gauge", "Whether a drafter rank is alive (0: dead, its target decodes plainly).");
  for (const auto& d : drafters) {
    out += fmt::format("tandem_gen_drafter_up{{rank=\"{}\",target=\"{}\"}} {}\n", d.rank, d.target, d.dead ? 0 : 1);
  }
  header(out, "tandem_gen_drafter_service", "gauge",
         "A drafter rank's place in service (POST /admin/drain): 1 for its state, serving, draining or drained.");
  for (const auto& d : drafters) {
    for (DrainState state : {DrainState::kServing, DrainState::kDraining, DrainState::kDrained}) {
      out += fmt::format("tandem_gen_drafter_service{{rank=\"{}\",target=\"{}\",state=\"{}\"}} {}\n", d.rank,
                         d.target, to_string(state), d.drain == state ? 1 : 0);
    }
  }
  header(out, "tandem_gen_drafter_drains_total", "counter", "Times a drafter rank was drained (POST /admin/drain).");
  for (const auto& d : drafters) {
    out += fmt::format("tandem_gen_drafter_drains_total{{rank=\"{}\",target=\"{}\"}} {}\n", d.rank, d.target,
                       d.drains);
  }
  return out;
}

}  // namespace tandem::coordinator
