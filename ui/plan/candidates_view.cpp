// CandidatesView: a column per pinned plan; memory bars and step parts on scales shared by all.
#include "ui/plan/candidates_view.h"

#include <QPainter>
#include <algorithm>

#include "ui/common/plot_theme.h"

namespace tessera::studio {

namespace {

const QColor kPartColors[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xe1, 0x57, 0x59),
                              QColor(0xbb, 0xbb, 0xbb), QColor(0x76, 0xb7, 0xb2)};
const char* kPartNames[] = {"compute", "comm", "bubble", "offload"};

QString ms_str(double s) {
    return QString::number(s * 1e3, 'f', s < 0.01 ? 2 : 0) + " ms";
}

}  // namespace

CandidatesView::CandidatesView(QWidget* parent) : QWidget(parent) {
    setObjectName("candidatesView");
    setMinimumHeight(170);
}

void CandidatesView::setCandidates(std::vector<Candidate> c) {
    if ((int)c.size() > kMaxCandidates) c.resize(kMaxCandidates);
    m_candidates = std::move(c);
    update();
}

void CandidatesView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing, false);
    const QColor text = palette().color(QPalette::WindowText);
    if (m_candidates.empty()) {
        p.setPen(text);
        p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
                   "Pin up to three plans (\"Pin this plan\") to compare their memory per rank and "
                   "step time here");
        return;
    }
    // shared scales: memory up to the largest capacity or peak, time up to the slowest step
    double memMax = 1, stepMax = 1e-12;
    for (const auto& c : m_candidates) {
        memMax = std::max(memMax, (double)tessera::plan_rank_capacity(c.estimate));
        memMax = std::max(memMax, (double)tessera::plan_fullest_bytes(c.estimate));
        stepMax = std::max(stepMax, c.parts.step_s);
    }
    const int n = (int)m_candidates.size();
    const int gap = 12, colW = (width() - gap * (n + 1)) / std::max(1, n);
    QFont small = font();
    small.setPointSizeF(std::max(7.0, font().pointSizeF() - 1.5));
    const QFontMetrics fm(small);
    const int line = fm.height();
    const int titleH = 3 * line, stepH = 3 * line + 14;
    for (int i = 0; i < n; ++i) {
        const auto& c = m_candidates[i];
        const int x0 = gap + i * (colW + gap);
        p.setFont(small);
        p.setPen(text);
        QRect title(x0, 2, colW, titleH);
        const int64_t fullest = tessera::plan_fullest_bytes(c.estimate);
        QString head =
            QString("%1. %2 tok/s · step %3 · fullest %7 %5 of %6 GiB\n%4")
                .arg(i + 1)
                .arg(c.estimate.tokens_per_s >= 1e6
                         ? QString::number(c.estimate.tokens_per_s / 1e6, 'f', 2) + " M"
                         : QString::number(c.estimate.tokens_per_s / 1e3, 'f', 1) + " k")
                .arg(ms_str(c.parts.step_s))
                .arg(c.title)
                .arg(fullest / double(1ll << 30), 0, 'f', 1)
                .arg(tessera::plan_rank_capacity(c.estimate) / double(1ll << 30), 0, 'f', 0)
                .arg(tessera::device_rank_noun(c.estimate.device));
        p.drawText(title, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, head);
        // memory: one bar per GPU, stacked by category
        const QRect mem(x0, 2 + titleH + 4, colW, height() - titleH - stepH - 10);
        p.setPen(QColor(128, 128, 128, 90));
        p.drawRect(mem.adjusted(0, 0, -1, -1));
        const int ranks = (int)c.estimate.ranks.size();
        const double slot = mem.width() / double(std::max(1, ranks));
        const double bw = std::max(1.0, slot * (ranks > 32 ? 0.9 : 0.7));
        auto yOf = [&](double bytes) { return mem.bottom() - bytes / memMax * (mem.height() - 4); };
        const int64_t cap = tessera::plan_rank_capacity(c.estimate);
        for (int r = 0; r < ranks; ++r) {
            const auto& rk = c.estimate.ranks[r];
            double base = 0;
            const double x = mem.left() + r * slot + (slot - bw) / 2;
            for (int k = 0; k < (int)tessera::MemCategory::host; ++k) {
                const double b = (double)rk.at_peak_bytes[k];
                if (b <= 0) continue;
                const double y1 = yOf(base), y2 = yOf(base + b);
                p.fillRect(QRectF(x, y2, bw, y1 - y2), mem_category_color(k));
                base += b;
            }
            if (rk.device_peak_bytes > cap)
                p.fillRect(QRectF(x, yOf((double)rk.device_peak_bytes), bw, 3),
                           QColor(220, 20, 20));
        }
        p.setPen(QPen(QColor(200, 30, 30), 1.5, Qt::DashLine));
        p.drawLine(QPointF(mem.left(), yOf((double)cap)), QPointF(mem.right(), yOf((double)cap)));
        // step time in parts
        const double parts[] = {c.parts.compute_s, c.parts.comm_s, c.parts.bubble_s,
                                c.parts.offload_s};
        const QRect bar(x0, mem.bottom() + 6, colW, 12);
        double acc = 0;
        for (int k = 0; k < 4; ++k) {
            const double x1 = bar.left() + acc / stepMax * bar.width();
            acc += parts[k];
            const double x2 = bar.left() + acc / stepMax * bar.width();
            if (x2 > x1) p.fillRect(QRectF(x1, bar.top(), x2 - x1, bar.height()), kPartColors[k]);
        }
        p.setPen(text);
        // a small colour key before each part's figure
        int lx = bar.left(), ly = bar.bottom() + 4;
        for (int k = 0; k < 4; ++k) {
            const QString t = QString("%1 %2").arg(kPartNames[k]).arg(ms_str(parts[k]));
            const int w = fm.horizontalAdvance(t) + 16;
            if (lx + w > bar.right() && lx > bar.left()) lx = bar.left(), ly += line;
            p.fillRect(QRect(lx, ly + line / 4, 8, 8), kPartColors[k]);
            p.drawText(QRect(lx + 11, ly, w, line), Qt::AlignLeft | Qt::AlignVCenter, t);
            lx += w + 4;
        }
    }
}

}  // namespace tessera::studio
