// PartitionEditor: painting (lanes, layers sized by FLOPs, TP shards, boundaries) and the
// boundary drag. See partition_editor.h.
#include "ui/plan/partition_editor.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <numeric>

#include "engine/model/gpt.h"
#include "engine/parallel/stage_runner.h"
#include "engine/plan/estimator.h"
#include "ui/plan/plan_colors.h"

namespace tessera::studio {

namespace {
constexpr int kLeft = 64, kRight = 96, kTop = 22, kBottom = 20, kGrab = 6;
}

PartitionEditor::PartitionEditor(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setObjectName("partitionEditor");
}

void PartitionEditor::setConfig(const tessera::RunConfig& cfg) {
    m_cfg = cfg;
    const auto& m = cfg.model;
    m_pp = std::max(1, cfg.parallel.pp), m_tp = std::max(1, cfg.parallel.tp);
    m_dp = std::max(1, cfg.parallel.dp), m_v = std::max(1, cfg.parallel.virtual_stages);
    m_cost.clear();
    if (m.preset != "mlp" && m.n_layer > 0) {
        tessera::GptDims d{m.n_layer, m.n_head, m.d_model, m.seq_len, tessera::plan_vocab_size(m)};
        for (const auto& s : tessera::gpt_layer_specs(d)) m_cost.push_back(s.flops_per_token);
        if ((int)m_cost.size() != m.n_layer + 2) m_cost.assign(m.n_layer + 2, 1.0);
        // the embedding is a lookup: give it a visible sliver (a fifth of a block)
        double block = m_cost.size() > 2 ? m_cost[1] : 1.0;
        for (double& c : m_cost) c = std::max(c, 0.2 * block);
    }
    // the chunks as the runtime cuts them (parallel.stages, or the runtime's own compute-balanced
    // split when absent); a broken parallel.stages is drawn as the even split
    int chunks = m_pp * m_v;
    std::vector<int> st = cfg.parallel.stages;
    if (st.empty() && chunks <= m.n_layer) {
        try {
            st = tessera::plan_blocks_per_chunk(cfg);
        } catch (const std::exception&) {
            st.clear();
        }
    }
    long sum = std::accumulate(st.begin(), st.end(), 0L);
    bool ok = (int)st.size() == chunks && sum == m.n_layer &&
              std::all_of(st.begin(), st.end(), [](int n) { return n >= 1; });
    if (!ok) {
        st.assign(chunks, 0);
        for (int k = 0; k < chunks && m.n_layer > 0; ++k) st[k] = m.n_layer / chunks;
        if (chunks > 0 && m.n_layer > 0) st.back() += m.n_layer % chunks;
    }
    m_chunks = st;
    update();
}

QRectF PartitionEditor::plotRect() const {
    return QRectF(kLeft, kTop, std::max(10, width() - kLeft - kRight),
                  std::max(10, height() - kTop - kBottom));
}

double PartitionEditor::layerX(int layer) const {
    QRectF r = plotRect();
    double total = std::accumulate(m_cost.begin(), m_cost.end(), 0.0);
    if (total <= 0) return r.left();
    double before = std::accumulate(m_cost.begin(),
                                    m_cost.begin() + std::clamp(layer, 0, (int)m_cost.size()), 0.0);
    return r.left() + r.width() * before / total;
}

int PartitionEditor::blockEdgeX(int b) const {
    return int(std::lround(layerX(b + 1)));
}

int PartitionEditor::boundaryX(int k) const {
    int blocks = std::accumulate(m_chunks.begin(), m_chunks.begin() + k + 1, 0);
    return blockEdgeX(blocks);
}

int PartitionEditor::laneCenterY(int stage) const {
    QRectF r = plotRect();
    double h = r.height() / m_pp;
    return int(r.top() + h * (stage + 0.5));
}

int PartitionEditor::hitBoundary(int x) const {
    int best = -1, bestDist = kGrab + 1;
    for (int k = 0; k + 1 < (int)m_chunks.size(); ++k) {
        int d = std::abs(boundaryX(k) - x);
        if (d < bestDist) best = k, bestDist = d;
    }
    return best;
}

QString PartitionEditor::emptyMessage() const {
    if (!m_cost.empty()) return {};
    return m_cfg.model.preset == "mlp" ? tr("An MLP is not pipelined: nothing to partition (it "
                                            "runs data-parallel and ZeRO plans).")
                                       : tr("No model to partition.");  // no project open
}

int PartitionEditor::layerAt(int x) const {
    for (int i = 0; i < (int)m_cost.size(); ++i)
        if (x < layerX(i + 1)) return i;
    return (int)m_cost.size() - 1;
}

// ----------------------------------------------------------------------------
// painting

void PartitionEditor::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.fillRect(rect(), palette().base());
    if (m_cost.empty()) {
        p.drawText(rect(), Qt::AlignCenter, emptyMessage());
        return;
    }
    QRectF r = plotRect();
    double laneH = r.height() / m_pp;
    const int L = (int)m_cost.size() - 2;
    QFont small = font();
    small.setPointSizeF(font().pointSizeF() * 0.85);
    p.setFont(small);

    // lanes
    for (int s = 0; s < m_pp; ++s) {
        QRectF lane(r.left(), r.top() + s * laneH, r.width(), laneH);
        QColor bg = plan_stage_color(s);
        bg.setAlpha(28);
        p.fillRect(lane, bg);
        p.setPen(plan_stage_color(s).darker(130));
        p.drawText(QRectF(4, lane.top(), kLeft - 8, laneH), Qt::AlignVCenter | Qt::AlignRight,
                   QString("stage %1").arg(s));
    }
    // layers: chunk g on stage g % pp
    int layer = 1;  // blocks start at layer index 1
    for (int g = 0; g < (int)m_chunks.size(); ++g) {
        int s = g % m_pp;
        int first = (g == 0) ? 0 : layer;
        int last = layer + m_chunks[g] - 1 + ((g + 1 == (int)m_chunks.size()) ? 1 : 0);
        for (int i = first; i <= last && i <= L + 1; ++i) {
            QRectF box(layerX(i) + 0.5, r.top() + s * laneH + 3, layerX(i + 1) - layerX(i) - 1,
                       laneH - 6);
            bool isBlock = i >= 1 && i <= L;
            QColor c = plan_stage_color(s, isBlock ? 0 : 0.5);
            int shards = isBlock || i == L + 1 || i == 0 ? m_tp : 1;
            double sh = box.height() / shards;
            for (int t = 0; t < shards; ++t) {
                QRectF part(box.left(), box.top() + t * sh, box.width(), sh);
                p.fillRect(part, plan_stage_color(s, shards > 1 ? 0.35 * t / (shards - 1)
                                                                : (isBlock ? 0 : 0.5)));
                if (t > 0) {
                    p.setPen(QPen(QColor(255, 255, 255, 160), 1));
                    p.drawLine(part.topLeft(), part.topRight());
                }
            }
            p.setPen(QPen(c.darker(150), 1));
            p.setBrush(Qt::NoBrush);
            p.drawRect(box);
            if (i == 0 || i == L + 1) {
                QString t = i == 0 ? "emb" : "norm+head";
                if (p.fontMetrics().horizontalAdvance(t) + 4 > box.width())
                    t = i == 0 ? "" : "head";
                p.setPen(Qt::white);
                if (p.fontMetrics().horizontalAdvance(t) + 4 <= box.width())
                    p.drawText(box, Qt::AlignCenter, t);
            }
        }
        if (g > 0 || m_chunks.size() == 1) {
        }
        // chunk label
        double x0 = layerX(first), x1 = layerX(last + 1);
        p.setPen(palette().text().color());
        if (x1 - x0 > 30)
            p.drawText(QRectF(x0, 2, x1 - x0, kTop - 4), Qt::AlignCenter,
                       m_v > 1 ? QString("s%1.c%2 · %3").arg(s).arg(g / m_pp).arg(m_chunks[g])
                               : QString("%1 blocks").arg(m_chunks[g]));
        layer += m_chunks[g];
    }
    // the outlier stage: its lane outlined, the tag at its right end over a backing
    if (m_outlier >= 0 && m_outlier < m_pp) {
        const QColor c = m_outlierFixable ? QColor(0xb2, 0x6a, 0x00) : QColor(0x80, 0x80, 0x80);
        QRectF lane(r.left() + 1, r.top() + m_outlier * laneH + 1, r.width() - 2, laneH - 2);
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(c, 2.5, Qt::DashLine));
        p.drawRect(lane);
        const QString tag = QString::fromUtf8("\u26a0 ") + m_outlierTag;
        const QFontMetricsF fm(p.font());
        const double w = fm.horizontalAdvance(tag) + 10, h = fm.height() + 4;
        // in the lane's wider empty stretch beside the stage's own layers (one chunk per stage),
        // else at its top right
        double x = lane.right() - w - 3;
        if (m_v == 1 && m_outlier < (int)m_chunks.size()) {
            const auto [lo, hi] = tessera::chunk_layer_range(m_chunks, m_outlier, L + 2);
            const double left = layerX(lo) - lane.left(), right = lane.right() - layerX(hi);
            if (left >= right && left >= w + 6)
                x = lane.left() + (left - w) / 2;
            else if (right >= w + 6)
                x = layerX(hi) + (right - w) / 2;
        }
        QRectF box(x, lane.center().y() - h / 2, w, h);
        m_outlierBox = box;
        p.setPen(QPen(c, 1));
        p.setBrush(QColor(255, 248, 230, 235));
        p.drawRoundedRect(box, 3, 3);
        p.setPen(c.darker(120));
        p.drawText(box, Qt::AlignCenter, tag);
    }
    // boundaries (draggable)
    for (int k = 0; k + 1 < (int)m_chunks.size(); ++k) {
        int x = boundaryX(k);
        bool hot = k == m_drag || k == m_hover;
        p.setPen(QPen(hot ? palette().highlight().color() : palette().text().color(), hot ? 3 : 2));
        p.drawLine(QPointF(x, r.top() - 2), QPointF(x, r.bottom() + 2));
        p.setBrush(hot ? palette().highlight() : palette().text());
        p.drawEllipse(QPointF(x, r.bottom() + 6), 4, 4);
    }
    // axis and replicas
    p.setPen(palette().text().color());
    p.drawText(QRectF(r.left(), r.bottom() + 2, r.width(), kBottom - 2),
               Qt::AlignLeft | Qt::AlignVCenter,
               QString("embedding → %1 blocks (width = FLOPs) → final norm + head").arg(L));
    // the model's DP replicas as stacked cards, and below them (in the text colour) what they are
    QRectF right(r.right() + 8, r.top(), kRight - 12, r.height());
    const int cards = std::min(m_dp, 3);
    const double cardH = std::clamp(r.height() / 3, 12.0, 28.0);
    for (int k = cards - 1; k >= 0; --k) {
        QRectF card(right.left() + 4 * k, right.top() + 4 * k, 40, cardH);
        p.setBrush(palette().window());
        p.setPen(palette().mid().color());
        p.drawRect(card);
    }
    p.setPen(palette().text().color());
    const double textTop = right.top() + cardH + 4 * cards + 2;
    p.drawText(QRectF(right.left(), textTop, right.width(), r.bottom() + kBottom - textTop),
               Qt::AlignTop | Qt::AlignLeft,
               QString("× %1 DP\nreplica%2\nTP %3").arg(m_dp).arg(m_dp == 1 ? "" : "s").arg(m_tp));
}

// ----------------------------------------------------------------------------
// drag a boundary, or drag a block onto a neighbouring stage's lane

void PartitionEditor::mousePressEvent(QMouseEvent* e) {
    m_drag = hitBoundary(int(e->position().x()));
    if (m_drag >= 0) {
        Q_EMIT dragStarted(++m_dragSerial);
        update();
        return;
    }
    // not on a boundary: pick up the transformer block under the cursor (dropped on a lane)
    const int L = (int)m_cost.size() - 2;
    int layer = m_cost.empty() ? -1 : layerAt(int(e->position().x()));
    m_blockDrag = (layer >= 1 && layer <= L) ? layer - 1 : -1;
}

// Dropping block b on the lane of the chunk before or after its own moves the boundary between
// them so that b (and the blocks between it and that boundary) changes chunk; each chunk keeps at
// least one block. Returns false when the drop changes nothing.
bool PartitionEditor::dropBlock(int b, int lane) {
    int g = 0, first = 0;
    while (g < (int)m_chunks.size() && first + m_chunks[g] <= b) first += m_chunks[g++];
    if (g >= (int)m_chunks.size()) return false;
    std::vector<int> st = m_chunks;
    if (g + 1 < (int)st.size() && (g + 1) % m_pp == lane) {
        int moved = first + st[g] - b;  // b .. end of chunk g
        if (st[g] - moved < 1) return false;
        st[g] -= moved, st[g + 1] += moved;
    } else if (g > 0 && (g - 1) % m_pp == lane) {
        int moved = b - first + 1;  // start of chunk g .. b
        if (st[g] - moved < 1) return false;
        st[g] -= moved, st[g - 1] += moved;
    } else {
        return false;
    }
    m_chunks = st;
    Q_EMIT dragStarted(++m_dragSerial);
    Q_EMIT stagesEdited(st);
    update();
    return true;
}

void PartitionEditor::mouseMoveEvent(QMouseEvent* e) {
    int x = int(e->position().x());
    if (m_drag < 0) {
        int h = hitBoundary(x);
        if (h != m_hover) m_hover = h, update();
        setCursor(h >= 0 ? Qt::SplitHCursor : Qt::ArrowCursor);
        return;
    }
    int k = m_drag;
    int before = std::accumulate(m_chunks.begin(), m_chunks.begin() + k, 0);
    int pair = m_chunks[k] + m_chunks[k + 1];
    // the block edge nearest to x, keeping both chunks at >= 1 block
    int best = m_chunks[k], bestDist = INT32_MAX;
    for (int n = 1; n < pair; ++n) {
        int d = std::abs(blockEdgeX(before + n) - x);
        if (d < bestDist) best = n, bestDist = d;
    }
    if (best == m_chunks[k]) return;
    std::vector<int> st = m_chunks;
    st[k] = best, st[k + 1] = pair - best;
    m_chunks = st;
    update();
    Q_EMIT stagesEdited(st);
}

void PartitionEditor::mouseReleaseEvent(QMouseEvent* e) {
    if (m_blockDrag >= 0 && m_pp > 0) {
        QRectF r = plotRect();
        int lane = int((e->position().y() - r.top()) / (r.height() / m_pp));
        if (lane >= 0 && lane < m_pp) dropBlock(m_blockDrag, lane);
    }
    m_blockDrag = -1;
    m_drag = -1;
    update();
}

void PartitionEditor::setOutlier(int stage, const QString& tag, const QString& tip, bool fixable) {
    m_outlier = stage;
    m_outlierTag = stage >= 0 ? tag : QString();
    m_outlierTip = stage >= 0 ? tip : QString();
    m_outlierFixable = fixable;
    m_outlierBox = {};
    update();
}

bool PartitionEditor::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip && !m_cost.empty()) {
        auto* he = static_cast<QHelpEvent*>(e);
        if (m_outlier >= 0 && m_outlierBox.contains(he->pos())) {  // the tag: the advice
            QToolTip::showText(he->globalPos(), m_outlierTip, this);
            return true;
        }
        int i = layerAt(he->pos().x()), L = (int)m_cost.size() - 2;
        int chunk = 0, acc = 0;
        for (int g = 0; g < (int)m_chunks.size(); ++g) {
            acc += m_chunks[g];
            if (i <= acc || g + 1 == (int)m_chunks.size()) {
                chunk = g;
                break;
            }
        }
        if (i == 0) chunk = 0;
        QString name = i == 0       ? "embedding"
                       : i == L + 1 ? "final norm + head"
                                    : QString("block %1").arg(i - 1);
        QToolTip::showText(
            he->globalPos(),
            QString("%1 — stage %2 (chunk %3)\n%4 MFLOP per token forward, split over TP %5")
                .arg(name)
                .arg(chunk % m_pp)
                .arg(chunk)
                .arg(m_cost[i] / 1e6, 0, 'f', 1)
                .arg(m_tp),
            this);
        return true;
    }
    return QWidget::event(e);
}

}  // namespace tessera::studio
