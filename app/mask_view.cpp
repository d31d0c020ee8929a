#include "mask_view.h"

namespace headscope {

void MaskView::draw(Session&, Ui&) { ImGui::TextUnformatted("mask: in progress"); }

}  // namespace headscope
