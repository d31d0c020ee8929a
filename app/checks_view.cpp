#include "checks_view.h"

namespace headscope {

void ChecksView::draw(Session&, Ui&) { ImGui::TextUnformatted("checks: in progress"); }

}  // namespace headscope
