#include "dance_view.h"

namespace headscope {

void DanceView::draw(Session&, Ui&) { ImGui::Text("dance step %d: in progress", step_); }

}  // namespace headscope
