// The Model page: choose a preset or custom sizes, import an architecture from safetensors, and
// see the layer table and the model's memory at each precision. Every change goes through
// ProjectDocument::edit() (undoable); the page redraws from configChanged().
#pragma once
#include <QWidget>

class QComboBox;
class QSpinBox;
class QLineEdit;
class QLabel;
class QTableView;
class QPushButton;
class QCustomPlot;

namespace tessera::studio {

class ProjectDocument;
class LayerTableModel;

class ModelPage : public QWidget {
    Q_OBJECT
public:
    explicit ModelPage(ProjectDocument* doc, QWidget* parent = nullptr);

    // Reads n_layer, d_model, vocab, seq_len (and n_head from metadata) from a safetensors file
    // and sets them with model.init_from as one undoable edit. False + importFailed on a bad file.
    bool importSafetensors(const QString& path);
    LayerTableModel* layerModel() const { return m_layers; }
    QString validationText() const;

public Q_SLOTS:
    void setDarkTheme(bool dark);

Q_SIGNALS:
    void importFailed(const QString& message);

private:
    void refresh();  // config -> widgets, table, memory, plot
    void editDim(const char* what, int id, int value);
    void chooseSafetensors();

    ProjectDocument* m_doc;
    LayerTableModel* m_layers;
    QComboBox* m_preset;
    QSpinBox *m_nLayer, *m_nHead, *m_dModel, *m_seqLen;
    QComboBox* m_vocab;
    QLineEdit* m_hidden;
    QLabel* m_initFrom;
    QPushButton* m_import;
    QLabel* m_validation;
    QLabel* m_summary;
    QLabel* m_memory[3][2];  // rows: weights, + grads, + AdamW; columns: fp32, bf16
    QTableView* m_table;
    QCustomPlot* m_plot;
    bool m_dark = false;
    QString m_importError;
};

}  // namespace tessera::studio
